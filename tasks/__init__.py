"""Task layer: declarative task specs, data readers, one normalised example schema per task kind.

The API's list of tasks (with where their data is) is `biobench.list_tasks(...)` (biobench.api): this layer sits
below the API and never calls it.
"""

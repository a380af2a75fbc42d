"""Task layer: declarative task specs, data readers, one normalised example schema per task kind."""

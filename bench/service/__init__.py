"""The leaderboard as a service: evaluation requests in a queue, workers that run them, and a deployable Space."""

"""The queue family: sends, polls, losses, commits and groups."""

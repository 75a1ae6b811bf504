"""From history.jsonl (or the rows recorded beside it) to the rows table."""

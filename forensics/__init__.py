"""Post-heal forensics: what the brokers hold and said, after the faults end.

Why a package of its own: replica verification, the coordinators' state, the
disk faults' account, the lost values' provenance and the log cuts around
share probes read the cluster and its logs, never the clients, and the run
needs nothing of them but their files.  ``forensics.steps`` lists them; the
run (kafka_chaos/run.py) loops over that list at three moments.
"""

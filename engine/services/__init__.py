"""Table services: rollback, restore, savepoints, clean, archival and crash repair.

Each is a planner producing a serialisable plan (written to the timeline first) and an executor
carrying it out idempotently, so a crash at any point leaves a pending instant that `repair`
finishes. All of them run under the table's single-writer lock (`engine.services.transaction`).
"""

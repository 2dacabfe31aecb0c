"""The ledger read without a JVM: read-only SQL in delta-rs (`sql`), what a user asks
(`parse`), the rows the CLI and the UI show (`rows`, `reader`), why a root is pending,
an app's heartbeat, and time to detect and recover."""

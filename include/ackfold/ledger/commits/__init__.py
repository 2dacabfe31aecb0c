"""Who may commit, and the commits: the lease (`lease`; its record and epoch floor,
`lease_record`) and the fence (`fence`; the tables it reads and claims, `fence_tables`),
one run at a time on every host (invariant 16); the per-host lock; the writer that appends
rows without a JVM (`writer`; what a table takes, `table_rows`) and each process's one
writer; the fold's mark, declared outputs, and MERGE/DELETE as SQL."""

"""Who may commit, and the commits: the lease and the fence (one run at a time on every
host, invariant 16), the per-host lock, the writer that appends rows without a JVM and
each process's one writer, the fold's mark, declared outputs, and MERGE/DELETE as SQL."""

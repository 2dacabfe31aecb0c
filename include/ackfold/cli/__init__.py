"""The `ackfold` command line: `main` (the parser and the entry point), one module per
command group (`local`, `replay`, `demo`, `jobs`, `read`), what they share (`common`), and
the progress lines of long commands (`progress`)."""

"""The `ackfold` command line (`main`), and the progress lines of long commands (`progress`)."""

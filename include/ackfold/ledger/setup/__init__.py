"""The tables created (`create`, from Spark) and brought up to this ackfold: optional
columns a stored contract table lacks (`upgrade`), and a ledger written by an earlier
ackfold (`layout`)."""

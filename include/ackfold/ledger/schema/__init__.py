"""The contract and its schemas: the tables' names, schemas and layout (`tables`; the
operational tables' DDL, `operational`), the contract as Delta, Arrow, JSON Schema and SQL
(`contract`), the parquet encoding, derived ids and id schemes, a root's statuses, and
ledger values as ackfold shows them."""

-- Prefect's PostgreSQL schema uses trigram indexes (pg_trgm; a contrib extension shipped with the
-- postgres image). Prefect's migrations also run CREATE EXTENSION IF NOT EXISTS, which needs a role
-- allowed to create extensions; enabling it here, at the database's first start, as the superuser
-- POSTGRES_USER, makes the server start with any role. Runs only when the data volume is empty.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

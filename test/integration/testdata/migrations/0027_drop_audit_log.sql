-- Rails: drop_table :audit_log.
DROP TABLE "audit_log";

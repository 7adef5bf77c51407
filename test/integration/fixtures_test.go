//go:build integration

package integration

// typesDDL creates a table with every built-in type pgsync must carry
// unchanged, and fills it with ordinary, edge and NULL values.
const typesDDL = `
CREATE TABLE all_types (
  id          bigserial PRIMARY KEY,
  i2          smallint, i4 integer, i8 bigint,
  num         numeric, num_p numeric(12,3),
  f4          real, f8 double precision,
  t           text, vc varchar(40), ch char(5),
  b           boolean,
  by          bytea,
  d           date, tm time, tmtz timetz, ts timestamp, tstz timestamptz, iv interval,
  u           uuid,
  js          json, jsb jsonb,
  arr_i       integer[], arr_t text[], arr_2d integer[][],
  ip          inet, net cidr, mac macaddr,
  m           money,
  bt          bit(8), vb varbit(16),
  tsv         tsvector,
  big         text,
  created     timestamptz NOT NULL DEFAULT now(),
  status      text NOT NULL DEFAULT 'new'
);
INSERT INTO all_types (i2, i4, i8, num, num_p, f4, f8, t, vc, ch, b, by, d, tm, tmtz, ts, tstz, iv, u, js, jsb,
  arr_i, arr_t, arr_2d, ip, net, mac, m, bt, vb, tsv, big)
VALUES
 (1, 2, 3, 1.5, 123456789.123, 1.25, 3.141592653589793, 'plain', 'varchar', 'ab', true, '\x00ff10',
  '2024-02-29', '12:34:56.789', '12:00:00+02', '2024-01-01 00:00:00.123456', '2024-06-30 23:59:59.999999+05:30', '1 year 2 mons 3 days 04:05:06.789',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2, {"b": null}]}', '{"z": 1, "a": "x"}',
  '{1,2,3}', '{"a","b c","\"q\""}', '{{1,2},{3,4}}', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03',
  '1234.56', B'10101010', B'1011', 'the quick brown fox', 'short'),
 (-32768, -2147483648, -9223372036854775808, 'NaN', -0.001, 'NaN', 'Infinity', '', '', '', false, '\x',
  '-infinity', '00:00', '23:59:59-12', 'infinity', '-infinity', '-178000000 years', '00000000-0000-0000-0000-000000000000',
  '[]', '{}', '{}', '{}', '{}', '::1', '::/0', 'ff:ff:ff:ff:ff:ff', '-92233720368547758.08', B'00000000', B'',
  '', 'x'),
 (32767, 2147483647, 9223372036854775807, '1e-30', 999999999.999, '-Infinity', '-Infinity', 'üñíçødé ✓ 日本語 🐘',
  'tab	and\nnewline', 'é', NULL, '\x5c', 'infinity', '24:00:00', NULL, '-infinity', 'infinity', '-1 day -00:00:01', NULL,
  'null', '"string"', '{NULL,1}', '{NULL,"NULL",""}', NULL, '2001:db8::1', '2001:db8::/32', NULL, '0', B'11111111',
  B'1111111111111111', 'a:1A fat:2B,4C cat:5D', NULL),
 (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
-- Large values that PostgreSQL stores out of line (TOAST), compressible and not.
INSERT INTO all_types (t, big, by)
SELECT 'toast ' || g, repeat(md5(g::text), 20000), decode(repeat(md5((g * 7)::text), 5000), 'hex')
FROM generate_series(1, 3) g;
INSERT INTO all_types (t, big)
SELECT 'random toast', string_agg(md5(random()::text), '') FROM generate_series(1, 4000);
`

// multiTableDDL adds tables of several shapes: composite key, no key with
// REPLICA IDENTITY FULL and duplicate rows, a second schema, a quoted name,
// a generated column, and a bigger table.
const multiTableDDL = `
CREATE TABLE orders (tenant int, id int, amount numeric(10,2), note text, PRIMARY KEY (tenant, id));
INSERT INTO orders SELECT g % 7, g, g * 1.01, 'order ' || g FROM generate_series(1, 20000) g;
CREATE TABLE events (kind text, payload jsonb, at timestamptz);
ALTER TABLE events REPLICA IDENTITY FULL;
INSERT INTO events VALUES ('dup', '{"x":1}', '2024-01-01'), ('dup', '{"x":1}', '2024-01-01'), ('one', NULL, NULL);
CREATE SCHEMA sales;
CREATE TABLE sales."Mixed Case" ("Id" int PRIMARY KEY, "Value" text, total int GENERATED ALWAYS AS ("Id" * 2) STORED);
INSERT INTO sales."Mixed Case" ("Id", "Value") SELECT g, 'v' || g FROM generate_series(1, 100) g;
`

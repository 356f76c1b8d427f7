-- A tuning database of schema version 1, as fusor wrote it before the calibration log existed, for
-- the v1 -> v2 migration test (tests/db/migration_test.cc). Made at commit 1c41b7f with the v1
-- SqlitePlanStore: targets target-a and target-b; plans for graphs 1 (with whole-plan and group
-- measurements), 2 (stored, then replaced) and 3 (target-b); plan 4 stored and deleted; then
-- `sqlite3 FILE .dump`. The two PRAGMA lines at the end are added by hand: .dump leaves them out.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO meta VALUES('created_unix_ms','1795424564924');
CREATE TABLE targets (
  target_id          TEXT PRIMARY KEY,   -- TargetFingerprint.id
  cpu_model          TEXT NOT NULL,
  isa                TEXT NOT NULL,      -- ISA oneDNN dispatches to, e.g. avx2
  cores              INTEGER NOT NULL,
  onednn_version     TEXT NOT NULL,
  cost_model_version TEXT NOT NULL,      -- cost model the profile's constants were fitted for
  calibrated_unix_ms INTEGER NOT NULL,   -- latest calibration; older plans are stale
  fingerprint        BLOB NOT NULL,      -- fusor.v1.TargetFingerprint
  profile            BLOB NOT NULL,      -- fusor.v1.HardwareProfile
  updated_unix_ms    INTEGER NOT NULL
);
INSERT INTO targets VALUES('target-a','Test CPU target-a','avx2',8,'3.0.0','cm1',1600000000000,X'0a087461726765742d6112115465737420435055207461726765742d611a046176783220085205332e302e30',X'0a2c0a087461726765742d6112115465737420435055207461726765742d611a046176783220085205332e302e301203636d31188080babbc82e920109090000000000208c40',1795424564936);
INSERT INTO targets VALUES('target-b','Test CPU target-b','avx2',8,'3.0.0','cm1',1600000000000,X'0a087461726765742d6212115465737420435055207461726765742d621a046176783220085205332e302e30',X'0a2c0a087461726765742d6212115465737420435055207461726765742d621a046176783220085205332e302e301203636d31188080babbc82e920109090000000000208c40',1795424564940);
CREATE TABLE graphs (
  graph_hash      TEXT PRIMARY KEY CHECK (length(graph_hash) = 64),  -- canonical SHA-256, hex
  model_name      TEXT NOT NULL,
  node_count      INTEGER NOT NULL,
  graph           BLOB NOT NULL,         -- fusor.v1.Graph
  created_unix_ms INTEGER NOT NULL
);
INSERT INTO graphs VALUES('7c9fa136d4413fa6173637e883b6998d32e1d675f88cddff9dcbcf331820f4b8','resnet',4,X'0a067265736e65741a0e1204436f6e76220274302a0274311a0e120452656c75220274312a0274321a0e1204436f6e76220274322a0274331a0e120452656c75220274332a027434',1795424564944);
INSERT INTO graphs VALUES('d86e8112f3c4c4442126f8e9f44f16867da487f29052bf91b810457db34209a4','bert',6,X'0a04626572741a0e1204436f6e76220274302a0274311a0e120452656c75220274312a0274321a0e1204436f6e76220274322a0274331a0e120452656c75220274332a0274341a0e1204436f6e76220274342a0274351a0e120452656c75220274352a027436',1795424564952);
INSERT INTO graphs VALUES('35be322d094f9d154a8aba4733b8497f180353bd7ae7b0a15f90b586b549f28b','resnet',4,X'0a067265736e65741a0e1204436f6e76220274302a0274311a0e120452656c75220274312a0274321a0e1204436f6e76220274322a0274331a0e120452656c75220274332a027434',1795424564960);
INSERT INTO graphs VALUES('f0a0278e4372459cca6159cd5e71cfee638302a7b9ca9b05c34181ac0a65ac5d','gone',2,X'0a04676f6e651a0e1204436f6e76220274302a0274311a0e120452656c75220274312a027432',1795424564964);
CREATE TABLE plans (
  plan_id              INTEGER PRIMARY KEY,
  graph_hash           TEXT NOT NULL REFERENCES graphs (graph_hash),
  target_id            TEXT NOT NULL REFERENCES targets (target_id),
  cost_model_version   TEXT NOT NULL,
  search_options       TEXT NOT NULL,    -- canonical text of the search options
  plan                 BLOB NOT NULL,    -- fusor.v1.Plan
  predicted_ns         REAL NOT NULL,
  measured_ns          REAL,             -- NULL: not measured
  unfused_predicted_ns REAL,
  unfused_measured_ns  REAL,
  speedup              REAL,             -- unfused / fused; NULL when unknown
  group_count          INTEGER NOT NULL,
  peak_memory_bytes    INTEGER NOT NULL,
  created_unix_ms      INTEGER NOT NULL,
  UNIQUE (graph_hash, target_id, cost_model_version, search_options)
);
INSERT INTO plans VALUES(1,'7c9fa136d4413fa6173637e883b6998d32e1d675f88cddff9dcbcf331820f4b8','target-a','cm1','',X'0a403763396661313336643434313366613631373336333765383833623639393864333265316436373566383863646466663964636263663333313832306634623812087461726765742d611a03636d312a1110021a0200013209310000000000407f402a13080110021a0202033209310000000000407f40390000000000408f40410000000000208c40490000000000409f40510000000000209c40588080406080d095ffbc31',1000.0,900.0,2000.0,1800.0,2.0,2,1048576,1700000000000);
INSERT INTO plans VALUES(2,'d86e8112f3c4c4442126f8e9f44f16867da487f29052bf91b810457db34209a4','target-a','cm1','',X'0a406438366538313132663363346334343432313236663865396634346631363836376461343837663239303532626639316238313034353764623334323039613412087461726765742d611a03636d312a1110021a02000132093100000000008893402a13080110021a020203320931000000000088934039000000000088a340490000000000409f405880804060e8d795ffbc31',2500.0,NULL,2000.0,NULL,0.8000000000000000444,2,1048576,1700000001000);
INSERT INTO plans VALUES(3,'35be322d094f9d154a8aba4733b8497f180353bd7ae7b0a15f90b586b549f28b','target-b','cm1','',X'0a403335626533323264303934663964313534613861626134373333623834393766313830333533626437616537623061313566393062353836623534396632386212087461726765742d621a03636d312a1110021a0200013209310000000000407f402a13080110021a0202033209310000000000407f40390000000000408f40490000000000409f40588080406080d095ffbc31',1000.0,NULL,2000.0,NULL,2.0,2,1048576,1700000000000);
CREATE TABLE measurements (
  measurement_id   INTEGER PRIMARY KEY,
  plan_id          INTEGER NOT NULL REFERENCES plans (plan_id) ON DELETE CASCADE,
  group_id         INTEGER,              -- FusionGroup.id; NULL: the whole plan
  samples          TEXT NOT NULL,        -- JSON array of sample times in ns
  sample_count     INTEGER NOT NULL,
  median_ns        REAL NOT NULL,
  spread           REAL NOT NULL,        -- interquartile range / median
  measured_unix_ms INTEGER NOT NULL
);
INSERT INTO measurements VALUES(1,1,NULL,'[900,910,890]',3,900.0,0.011111111111111111535,1700000000000);
INSERT INTO measurements VALUES(2,1,0,'[400,410]',2,405.0,0.012345679012345678327,1700000000000);
CREATE TABLE tuning_history (
  event_id           INTEGER PRIMARY KEY,
  at_unix_ms         INTEGER NOT NULL,
  event              TEXT NOT NULL CHECK (event IN
                       ('stored', 'replaced', 'imported', 'deleted', 'expired', 'calibrated')),
  graph_hash         TEXT,               -- NULL for target events
  target_id          TEXT NOT NULL,
  cost_model_version TEXT,
  search_options     TEXT,
  predicted_ns       REAL,
  measured_ns        REAL,
  detail             TEXT NOT NULL DEFAULT ''
);
INSERT INTO tuning_history VALUES(1,1795424564936,'calibrated',NULL,'target-a',NULL,NULL,NULL,NULL,'cost model cm1, calibrated_unix_ms 1600000000000');
INSERT INTO tuning_history VALUES(2,1795424564940,'calibrated',NULL,'target-b',NULL,NULL,NULL,NULL,'cost model cm1, calibrated_unix_ms 1600000000000');
INSERT INTO tuning_history VALUES(3,1795424564944,'stored','7c9fa136d4413fa6173637e883b6998d32e1d675f88cddff9dcbcf331820f4b8','target-a','cm1','',1000.0,900.0,'');
INSERT INTO tuning_history VALUES(4,1795424564952,'stored','d86e8112f3c4c4442126f8e9f44f16867da487f29052bf91b810457db34209a4','target-a','cm1','',3000.0,NULL,'');
INSERT INTO tuning_history VALUES(5,1795424564956,'replaced','d86e8112f3c4c4442126f8e9f44f16867da487f29052bf91b810457db34209a4','target-a','cm1','',3000.0,NULL,'by a newer tuning');
INSERT INTO tuning_history VALUES(6,1795424564956,'stored','d86e8112f3c4c4442126f8e9f44f16867da487f29052bf91b810457db34209a4','target-a','cm1','',2500.0,NULL,'');
INSERT INTO tuning_history VALUES(7,1795424564960,'stored','35be322d094f9d154a8aba4733b8497f180353bd7ae7b0a15f90b586b549f28b','target-b','cm1','',1000.0,NULL,'');
INSERT INTO tuning_history VALUES(8,1795424564964,'stored','f0a0278e4372459cca6159cd5e71cfee638302a7b9ca9b05c34181ac0a65ac5d','target-a','cm1','',1000.0,NULL,'');
INSERT INTO tuning_history VALUES(9,1795424564972,'deleted','f0a0278e4372459cca6159cd5e71cfee638302a7b9ca9b05c34181ac0a65ac5d','target-a','cm1','',1000.0,NULL,'');
CREATE INDEX graphs_by_model ON graphs (model_name);
CREATE INDEX plans_by_target ON plans (target_id, graph_hash);
CREATE INDEX plans_by_created
  ON plans (created_unix_ms DESC, graph_hash, target_id, cost_model_version, search_options);
CREATE INDEX measurements_by_plan ON measurements (plan_id);
CREATE INDEX history_by_graph ON tuning_history (graph_hash, target_id);
COMMIT;
PRAGMA user_version = 1;
PRAGMA application_id = 1179997010;

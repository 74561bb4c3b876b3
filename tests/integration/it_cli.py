#!/usr/bin/env python3
"""The mariadb command-line client through claimguard: output, errors and exit codes equal to direct."""

import os
import re
import subprocess
import tempfile

import itlib

CLI_TIMEOUT_S = 120
# Timings the CLI prints with -v: the only part of its output allowed to differ between runs.
TIMING = re.compile(r"\(\d+\.\d+ sec\)")

TYPES_SQL = """
CREATE OR REPLACE TABLE cli_types (id INT PRIMARY KEY, i BIGINT UNSIGNED, d DECIMAL(12,3), f DOUBLE,
  s VARCHAR(40) CHARACTER SET utf8mb4, b VARBINARY(8), dt DATETIME(3), n INT, j JSON, e ENUM('x','y'));
INSERT INTO cli_types VALUES
  (1, 18446744073709551615, -123456789.125, 1e-300, 'héllo ☃', X'00ff0a09', '2024-02-29 01:02:03.456', NULL, '{"a":[1,null]}', 'y'),
  (2, 0, 0, -0.5, 'tab\\there', X'', '1000-01-01 00:00:00', 7, NULL, NULL),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT * FROM cli_types ORDER BY id;
SELECT 1/0, CAST('x1' AS INT);
SHOW WARNINGS;
SELECT COUNT(*), SUM(seq) FROM seq_1_to_3000;
"""

SOURCE_SQL = """-- a script with several kinds of statements, run with `source`
CREATE OR REPLACE TABLE cli_src (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(20));
INSERT INTO cli_src (v) VALUES ('a'), ('b'), (NULL);
DELIMITER //
CREATE OR REPLACE PROCEDURE cli_two_results()
BEGIN
  SELECT COUNT(*) AS n FROM cli_src;
  SELECT id, v FROM cli_src ORDER BY id;
END //
DELIMITER ;
CALL cli_two_results();
SELECT * FROM cli_no_such_table;
UPDATE cli_src SET v = 'z' WHERE v IS NULL;
START TRANSACTION;
DELETE FROM cli_src WHERE id = 1;
ROLLBACK;
SELECT * FROM cli_src ORDER BY id;
"""


def run_cli(target, args, stdin=None, user="native", password=None, database="cgtest"):
    """(exit code, stdout, stderr) of one mariadb CLI run against target, timings masked."""
    e = itlib.env()
    name, pw = itlib.credentials(user)
    cmd = ["mariadb", "--no-defaults", "--protocol=TCP", f"--host={e['HOST']}", f"--port={itlib.port(target)}",
           f"--user={name}", f"--password={pw if password is None else password}"]
    if database:
        cmd.append(f"--database={database}")
    r = subprocess.run(cmd + args, input=(stdin or "").encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=CLI_TIMEOUT_S, check=False)
    out = TIMING.sub("(T sec)", r.stdout.decode(errors="replace"))
    err = TIMING.sub("(T sec)", r.stderr.decode(errors="replace"))
    return [f"exit={r.returncode}"] + out.splitlines() + ["--- stderr"] + err.splitlines()


class CliTest(itlib.TransparencyCase):

    def check_ok(self, lines):
        self.assertEqual(lines[0], "exit=0", "\n".join(lines))

    def test_batch_mode_types_and_warnings(self):
        self.assert_transparent(lambda t: run_cli(t, ["--batch", "-e", TYPES_SQL]), self.check_ok)

    def test_table_xml_and_column_info_output(self):
        self.assert_transparent(lambda t: run_cli(t, ["--table", "--column-type-info", "-e", TYPES_SQL]) +
                                run_cli(t, ["--xml", "-e", "SELECT * FROM cli_types ORDER BY id"]) +
                                run_cli(t, ["--html", "--skip-column-names", "-e", "SELECT s, b FROM cli_types"]),
                                self.check_ok)

    def test_verbose_affected_rows(self):
        sql = ("CREATE OR REPLACE TABLE cli_v (id INT PRIMARY KEY, v INT); INSERT INTO cli_v VALUES (1,1),(2,2);"
               "UPDATE cli_v SET v = v; UPDATE cli_v SET v = 5 WHERE id = 1; DELETE FROM cli_v; SELECT * FROM cli_v")
        self.assert_transparent(lambda t: run_cli(t, ["-vvv", "--show-warnings", "-e", sql]), self.check_ok)

    def test_source_script_with_procedure_and_errors(self):
        with tempfile.TemporaryDirectory(dir=itlib.state_dir()) as d:
            path = os.path.join(d, "script.sql")
            with open(path, "w", encoding="utf-8") as f:
                f.write(SOURCE_SQL)

            def scenario(t):
                return (run_cli(t, ["--table", "--force", "-e", f"source {path}"]) +
                        run_cli(t, ["--batch"], stdin=f"source {path}\n") +
                        run_cli(t, ["--batch", "--force", "-vvv"], stdin=SOURCE_SQL))
            self.assert_transparent(scenario, lambda lines: self.assertIn("ERROR 1146 (42S02)", "\n".join(lines)))

    def test_local_infile(self):
        with tempfile.TemporaryDirectory(dir=itlib.state_dir()) as d:
            path = os.path.join(d, "data.tsv")
            with open(path, "w", encoding="utf-8") as f:
                for k in range(20000):
                    value = "\\N" if k % 9 == 0 else str(k * 3)
                    f.write(f"{k}\tname {k}\t{value}\n")
            load = (f"CREATE OR REPLACE TABLE cli_infile (id INT PRIMARY KEY, name VARCHAR(30), v INT);"
                    f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE cli_infile;"
                    f"SELECT COUNT(*), SUM(v), COUNT(v), MAX(name) FROM cli_infile")

            def scenario(t):
                return (run_cli(t, ["--local-infile=1", "-vvv", "--batch", "-e", load]) +
                        run_cli(t, ["--local-infile=0", "--batch", "-e", load]))
            self.assert_transparent(scenario, lambda lines: self.assertIn("Records: 20000  Deleted: 0  Skipped: 0  Warnings: 0", lines))

    def test_errors_and_exit_codes(self):
        def scenario(t):
            return (run_cli(t, ["-e", "SELECT * FROM cli_no_such_table"]) +
                    run_cli(t, ["-e", "SELEC 1"]) +
                    run_cli(t, ["-e", "SELECT 1"], password="wrong-password") +
                    run_cli(t, ["-e", "SELECT 1"], database="cli_no_such_db") +
                    run_cli(t, ["-e", "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'from the CLI'"]))
        self.assert_transparent(scenario, lambda lines: self.assertIn("ERROR 1045 (28000)", "\n".join(lines)))

    def test_ed25519_login(self):
        sql = "SELECT CURRENT_USER(), DATABASE(); SELECT @@version_comment"
        self.assert_transparent(lambda t: run_cli(t, ["--batch", "-e", sql], user="ed25519") +
                                run_cli(t, ["--batch", "-e", sql], user="ed25519", password="nope", database=""),
                                lambda lines: self.assertIn("cg_ed25519@%\tcgtest", lines))


if __name__ == "__main__":
    itlib.main()

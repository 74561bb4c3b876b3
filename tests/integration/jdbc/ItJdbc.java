// MariaDB Connector/J through claimguard: server prepared statements, batches, blobs, metadata, transactions.

import java.io.ByteArrayInputStream;
import java.math.BigDecimal;
import java.security.MessageDigest;
import java.sql.*;
import java.util.*;

/**
 * Runs each scenario against MariaDB directly and through proxy1 and proxy2, for each connection-option
 * variant, and compares everything the application sees. Exit code 0 only when every comparison holds.
 * Arguments: host mariadbPort proxy1Port proxy2Port user password ed25519User ed25519Password database
 */
public final class ItJdbc {
    static final int BIG_BLOB_BYTES = 20 * 1024 * 1024;
    static final int BATCH_ROWS = 500;
    static final int STREAMED_ROWS = 10000;
    static final int STREAM_FETCH_SIZE = 100;
    static final int CACHED_PREPARES = 50;
    static final int DIFF_CONTEXT = 3;

    // Connection-option variants; each scenario runs under each of them.
    static final String[][] VARIANTS = {
        {"server-ps", "useServerPrepStmts=true"},
        {"server-ps-cached", "useServerPrepStmts=true&cachePrepStmts=true&prepStmtCacheSize=250"},
        {"server-ps-pipelined-batch", "useServerPrepStmts=true&useBatchMultiSend=true&usePipelineAuth=true&allowMultiQueries=true"},
        {"server-ps-bulk", "useServerPrepStmts=true&useBulkStmts=true"},
        {"server-ps-no-pipeline", "useServerPrepStmts=true&useBatchMultiSend=false&usePipelineAuth=false"},
        {"client-ps-rewrite-batch", "useServerPrepStmts=false&rewriteBatchedStatements=true"},
    };

    interface Scenario {
        void run(Connection c, List<String> out) throws Exception;
    }

    static String host;
    static Map<String, Integer> ports = new LinkedHashMap<>();
    static String user, password, edUser, edPassword, database;
    static int failures = 0;
    static int comparisons = 0;

    public static void main(String[] args) throws Exception {
        host = args[0];
        ports.put("direct", Integer.parseInt(args[1]));
        ports.put("proxy1", Integer.parseInt(args[2]));
        ports.put("proxy2", Integer.parseInt(args[3]));
        user = args[4];
        password = args[5];
        edUser = args[6];
        edPassword = args[7];
        database = args[8];
        try (Connection c = DriverManager.getConnection(
                 "jdbc:mariadb://" + host + ":" + ports.get("direct") + "/" + database, user, password)) {
            DatabaseMetaData md = c.getMetaData();
            System.out.println("driver " + md.getDriverName() + " " + md.getDriverVersion() + ", server "
                + md.getDatabaseProductVersion());
        }

        Map<String, Scenario> scenarios = new LinkedHashMap<>();
        scenarios.put("prepared_types_and_metadata", ItJdbc::preparedTypes);
        scenarios.put("batches", ItJdbc::batches);
        scenarios.put("blob_20mib", ItJdbc::bigBlob);
        scenarios.put("transactions", ItJdbc::transactions);
        scenarios.put("errors_and_warnings", ItJdbc::errors);
        scenarios.put("callable_two_result_sets", ItJdbc::callable);
        scenarios.put("streaming_fetch_size", ItJdbc::streaming);
        scenarios.put("statement_cache_reuse", ItJdbc::cacheReuse);

        for (String[] variant : VARIANTS) {
            for (Map.Entry<String, Scenario> s : scenarios.entrySet()) {
                compare(variant[0] + "/" + s.getKey(), variant[1], user, password, s.getValue());
            }
        }
        compare("ed25519/login", "useServerPrepStmts=true", edUser, edPassword, (c, out) -> {
            query(c, out, "SELECT CURRENT_USER(), DATABASE()");
        });
        compare("native/wrong-password", "useServerPrepStmts=true", user, password + "-wrong", (c, out) -> {});
        System.out.println("jdbc comparisons " + comparisons + ", failures " + failures);
        System.exit(failures == 0 && comparisons > 0 ? 0 : 1);
    }

    static void compare(String name, String options, String u, String pw, Scenario s) {
        List<String> direct = runOne("direct", options, u, pw, s);
        if (Boolean.getBoolean("itjdbc.dump")) {
            direct.forEach(line -> System.out.println("  " + name + ": " + line));
        }
        for (String target : List.of("proxy1", "proxy2")) {
            comparisons++;
            List<String> proxied = runOne(target, options, u, pw, s);
            if (direct.equals(proxied)) {
                System.out.println("ok   " + name + " via " + target + " (" + direct.size() + " observations)");
                continue;
            }
            failures++;
            int i = 0;
            while (i < Math.min(direct.size(), proxied.size()) && direct.get(i).equals(proxied.get(i))) {
                i++;
            }
            System.out.println("FAIL " + name + " via " + target + ": first difference at observation " + i);
            for (int k = Math.max(0, i - DIFF_CONTEXT); k < i; k++) {
                System.out.println("       " + direct.get(k));
            }
            for (int k = i; k < Math.min(direct.size(), i + DIFF_CONTEXT); k++) {
                System.out.println("  direct:  " + direct.get(k));
            }
            for (int k = i; k < Math.min(proxied.size(), i + DIFF_CONTEXT); k++) {
                System.out.println("  proxied: " + proxied.get(k));
            }
        }
    }

    static List<String> runOne(String target, String options, String u, String pw, Scenario s) {
        List<String> out = new ArrayList<>();
        String url = "jdbc:mariadb://" + host + ":" + ports.get(target) + "/" + database + "?" + options
            + "&connectTimeout=10000&socketTimeout=120000";
        try (Connection c = DriverManager.getConnection(url, u, pw)) {
            out.add("connected autocommit=" + c.getAutoCommit() + " isolation=" + c.getTransactionIsolation()
                + " product=" + c.getMetaData().getDatabaseProductVersion());
            s.run(c, out);
        } catch (Exception e) {
            out.add("exception " + describe(e));
        }
        return out;
    }

    // Messages of Connector/J carry "(conn=ID)", the server thread id, which differs per connection,
    // and the port the client dialled, which differs per target.
    static String describe(Throwable e) {
        String msg = String.valueOf(e.getMessage()).replaceAll("\\(conn=\\d+\\)", "(conn=N)")
            .replaceAll("\\(port=\\d+\\)", "(port=P)");
        if (e instanceof SQLException) {
            SQLException se = (SQLException) e;
            return e.getClass().getSimpleName() + " code=" + se.getErrorCode() + " state=" + se.getSQLState()
                + " " + msg;
        }
        return e.getClass().getName() + " " + msg;
    }

    static void record(ResultSet rs, List<String> out) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        int n = md.getColumnCount();
        for (int i = 1; i <= n; i++) {
            out.add("column " + i + " name=" + md.getColumnName(i) + " label=" + md.getColumnLabel(i)
                + " type=" + md.getColumnType(i) + " typeName=" + md.getColumnTypeName(i)
                + " class=" + md.getColumnClassName(i) + " precision=" + md.getPrecision(i)
                + " scale=" + md.getScale(i) + " nullable=" + md.isNullable(i) + " signed=" + md.isSigned(i)
                + " table=" + md.getTableName(i) + " catalog=" + md.getCatalogName(i)
                + " autoinc=" + md.isAutoIncrement(i) + " size=" + md.getColumnDisplaySize(i));
        }
        while (rs.next()) {
            StringBuilder row = new StringBuilder("row");
            for (int i = 1; i <= n; i++) {
                Object o = rs.getObject(i);
                row.append(" | ");
                if (o instanceof byte[]) {
                    row.append("bytes:").append(HexFormat.of().formatHex((byte[]) o));
                } else if (o instanceof Blob) {
                    Blob b = (Blob) o;
                    row.append("blob:").append(HexFormat.of().formatHex(b.getBytes(1, (int) b.length())));
                } else {
                    row.append(o == null ? "NULL" : o.getClass().getSimpleName() + ":" + o);
                }
                row.append(" str=").append(rs.getString(i));
            }
            out.add(row.toString());
        }
    }

    static void query(Connection c, List<String> out, String sql) {
        try (Statement st = c.createStatement()) {
            boolean isResult = st.execute(sql);
            while (true) {
                if (isResult) {
                    try (ResultSet rs = st.getResultSet()) {
                        record(rs, out);
                    }
                } else {
                    int count = st.getUpdateCount();
                    if (count == -1) {
                        break;
                    }
                    out.add("update count " + count);
                }
                isResult = st.getMoreResults();
            }
            for (SQLWarning w = st.getWarnings(); w != null; w = w.getNextWarning()) {
                out.add("warning " + w.getErrorCode() + " " + w.getSQLState() + " " + w.getMessage());
            }
        } catch (SQLException e) {
            out.add("error " + describe(e));
        }
    }

    static void preparedTypes(Connection c, List<String> out) throws Exception {
        query(c, out, "CREATE OR REPLACE TABLE jdbc_types (id INT PRIMARY KEY AUTO_INCREMENT, i INT, l BIGINT, "
            + "bd DECIMAL(30,8), d DOUBLE, f FLOAT, s VARCHAR(50) CHARACTER SET utf8mb4, b VARBINARY(20), "
            + "dt DATE, tm TIME(3), ts DATETIME(6), bo BOOLEAN, n INT, t TINYINT UNSIGNED, y YEAR)");
        String insert = "INSERT INTO jdbc_types (i,l,bd,d,f,s,b,dt,tm,ts,bo,n,t,y) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
        try (PreparedStatement ps = c.prepareStatement(insert, Statement.RETURN_GENERATED_KEYS)) {
            ps.setInt(1, Integer.MIN_VALUE);
            ps.setLong(2, Long.MAX_VALUE);
            ps.setBigDecimal(3, new BigDecimal("-1234567890123456789012.12345678"));
            ps.setDouble(4, Double.MIN_VALUE);
            ps.setFloat(5, 3.25f);
            ps.setString(6, "héllo ☃ 😀 'q' \\");
            ps.setBytes(7, new byte[] {0, 1, (byte) 0xff, '\'', '\\'});
            ps.setDate(8, java.sql.Date.valueOf("2024-02-29"));
            ps.setTime(9, java.sql.Time.valueOf("23:59:58"));
            ps.setTimestamp(10, java.sql.Timestamp.valueOf("1999-12-31 23:59:59.123456"));
            ps.setBoolean(11, true);
            ps.setNull(12, Types.INTEGER);
            ps.setInt(13, 255);
            ps.setShort(14, (short) 2155);
            out.add("insert count " + ps.executeUpdate());
            try (ResultSet keys = ps.getGeneratedKeys()) {
                while (keys.next()) {
                    out.add("generated key " + keys.getLong(1));
                }
            }
            ps.setInt(1, 7);
            ps.setNull(3, Types.DECIMAL);
            ps.setString(6, null);
            ps.setBytes(7, new byte[0]);
            out.add("insert count " + ps.executeUpdate());
        }
        try (PreparedStatement ps = c.prepareStatement("SELECT * FROM jdbc_types WHERE id >= ? ORDER BY id")) {
            ParameterMetaData pmd = ps.getParameterMetaData();
            out.add("parameter count " + pmd.getParameterCount());
            for (int k = 0; k < 2; k++) {
                ps.setInt(1, k);
                try (ResultSet rs = ps.executeQuery()) {
                    record(rs, out);
                }
            }
        }
        try (PreparedStatement ps = c.prepareStatement("SELECT ?, ?, ?, ? + 1, CAST(? AS CHAR)")) {
            ps.setNull(1, Types.VARCHAR);
            ps.setString(2, "");
            ps.setBigDecimal(3, new BigDecimal("0.000001"));
            ps.setLong(4, -1);
            ps.setObject(5, java.time.LocalDateTime.of(2020, 1, 2, 3, 4, 5, 600000000));
            try (ResultSet rs = ps.executeQuery()) {
                record(rs, out);
            }
        }
    }

    static void batches(Connection c, List<String> out) throws Exception {
        query(c, out, "CREATE OR REPLACE TABLE jdbc_batch (id INT PRIMARY KEY, v VARCHAR(20))");
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_batch VALUES (?, ?)")) {
            for (int k = 1; k <= BATCH_ROWS; k++) {
                ps.setInt(1, k);
                ps.setString(2, k % 7 == 0 ? null : "v" + k);
                ps.addBatch();
            }
            out.add("batch counts " + Arrays.toString(ps.executeBatch()));
            ps.setInt(1, BATCH_ROWS + 1);
            ps.setString(2, "ok");
            ps.addBatch();
            ps.setInt(1, 1);
            ps.setString(2, "duplicate");
            ps.addBatch();
            ps.setInt(1, BATCH_ROWS + 2);
            ps.setString(2, "after");
            ps.addBatch();
            try {
                out.add("batch counts " + Arrays.toString(ps.executeBatch()));
            } catch (BatchUpdateException e) {
                out.add("batch error " + describe(e) + " counts " + Arrays.toString(e.getUpdateCounts()));
            }
        }
        try (Statement st = c.createStatement()) {
            st.addBatch("UPDATE jdbc_batch SET v = 'u' WHERE id <= 10");
            st.addBatch("DELETE FROM jdbc_batch WHERE id > 400");
            st.addBatch("INSERT INTO jdbc_batch VALUES (9999, 'text batch')");
            out.add("statement batch counts " + Arrays.toString(st.executeBatch()));
        }
        query(c, out, "SELECT COUNT(*), COUNT(v), MAX(id), SUM(id) FROM jdbc_batch");
    }

    static void bigBlob(Connection c, List<String> out) throws Exception {
        byte[] blob = new byte[BIG_BLOB_BYTES];
        new Random(42).nextBytes(blob);
        query(c, out, "CREATE OR REPLACE TABLE jdbc_big (id INT PRIMARY KEY, data LONGBLOB)");
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_big VALUES (?, ?)")) {
            ps.setInt(1, 1);
            ps.setBytes(2, blob);
            out.add("insert bytes " + ps.executeUpdate());
            ps.setInt(1, 2);
            ps.setBinaryStream(2, new ByteArrayInputStream(blob), blob.length);
            out.add("insert stream " + ps.executeUpdate());
        }
        try (PreparedStatement ps = c.prepareStatement("SELECT data, LENGTH(data) FROM jdbc_big ORDER BY id");
             ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                byte[] got = rs.getBytes(1);
                boolean same = Arrays.equals(got, blob);
                out.add("blob " + got.length + " same=" + same + " sha256="
                    + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(got)) + " len=" + rs.getLong(2));
                if (!same) {
                    throw new IllegalStateException("20 MiB blob read back differs from what was sent");
                }
            }
        }
    }

    static void transactions(Connection c, List<String> out) throws Exception {
        query(c, out, "CREATE OR REPLACE TABLE jdbc_tx (id INT PRIMARY KEY) ENGINE=InnoDB");
        c.setAutoCommit(false);
        c.setTransactionIsolation(Connection.TRANSACTION_SERIALIZABLE);
        out.add("autocommit " + c.getAutoCommit() + " isolation " + c.getTransactionIsolation());
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_tx VALUES (?)")) {
            ps.setInt(1, 1);
            ps.executeUpdate();
            c.rollback();
            ps.setInt(1, 2);
            ps.executeUpdate();
            Savepoint sp = c.setSavepoint("sp1");
            ps.setInt(1, 3);
            ps.executeUpdate();
            c.rollback(sp);
            c.commit();
        }
        c.setAutoCommit(true);
        c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
        query(c, out, "SELECT id FROM jdbc_tx ORDER BY id");
        query(c, out, "SELECT @@tx_isolation, @@autocommit");
        out.add("valid " + c.isValid(5));
        c.setReadOnly(true);
        query(c, out, "SELECT @@tx_read_only");
        c.setReadOnly(false);
        c.setCatalog("information_schema");
        out.add("catalog " + c.getCatalog());
        c.setCatalog(database);
    }

    static void errors(Connection c, List<String> out) throws Exception {
        query(c, out, "SELEC 1");
        query(c, out, "SELECT * FROM jdbc_no_such_table");
        query(c, out, "SELECT 1/0, CAST('1x' AS INT)");
        try (PreparedStatement ps = c.prepareStatement("SELECT * FROM jdbc_no_such_table WHERE id = ?")) {
            ps.setInt(1, 1);
            ps.executeQuery();
            out.add("no error?");
        } catch (SQLException e) {
            out.add("prepare error " + describe(e));
        }
        query(c, out, "CREATE OR REPLACE TABLE jdbc_mid (id INT PRIMARY KEY, k INT)");
        query(c, out, "INSERT INTO jdbc_mid SELECT seq, IF(seq = 300, 299, seq) FROM seq_1_to_400");
        try (PreparedStatement ps = c.prepareStatement(
                 "SELECT o.id, (SELECT i.id FROM jdbc_mid i WHERE i.k = o.id) FROM jdbc_mid o ORDER BY o.id");
             ResultSet rs = ps.executeQuery()) {
            int rows = 0;
            while (rs.next()) {
                rows++;
            }
            out.add("rows before error " + rows);
        } catch (SQLException e) {
            out.add("mid-result error " + describe(e));
        }
        query(c, out, "SELECT 'still in sync'");
    }

    static void callable(Connection c, List<String> out) throws Exception {
        query(c, out, "CREATE OR REPLACE PROCEDURE jdbc_two(IN n INT, OUT total INT) BEGIN "
            + "SELECT n AS first_col; SELECT seq FROM seq_1_to_3; SET total = n * 2; END");
        try (CallableStatement cs = c.prepareCall("{call jdbc_two(?, ?)}")) {
            cs.setInt(1, 21);
            cs.registerOutParameter(2, Types.INTEGER);
            boolean isResult = cs.execute();
            while (isResult || cs.getUpdateCount() != -1) {
                if (isResult) {
                    try (ResultSet rs = cs.getResultSet()) {
                        record(rs, out);
                    }
                } else {
                    out.add("update count " + cs.getUpdateCount());
                }
                isResult = cs.getMoreResults();
            }
            out.add("out param " + cs.getInt(2));
        }
        query(c, out, "CALL jdbc_two(5, @x)");
        query(c, out, "SELECT @x");
        // Only with allowMultiQueries=true (the pipelined variant) is this one COM_QUERY with three results.
        query(c, out, "CALL jdbc_two(6, @y); SELECT @y");
    }

    static void streaming(Connection c, List<String> out) throws Exception {
        try (PreparedStatement ps = c.prepareStatement("SELECT seq, REPEAT('s', seq % 50) FROM seq_1_to_" + STREAMED_ROWS)) {
            ps.setFetchSize(STREAM_FETCH_SIZE);
            try (ResultSet rs = ps.executeQuery()) {
                long sum = 0;
                int rows = 0;
                while (rs.next()) {
                    sum += rs.getLong(1) * rs.getString(2).length();
                    rows++;
                    if (rows == STREAMED_ROWS / 2) {
                        out.add("half way " + rows);
                    }
                }
                out.add("streamed rows " + rows + " checksum " + sum);
            }
        }
        // Closing a streaming result early must leave the connection usable.
        try (Statement st = c.createStatement()) {
            st.setFetchSize(STREAM_FETCH_SIZE);
            try (ResultSet rs = st.executeQuery("SELECT seq FROM seq_1_to_" + STREAMED_ROWS)) {
                rs.next();
                out.add("first streamed " + rs.getLong(1));
            }
        }
        query(c, out, "SELECT 'still in sync'");
    }

    static void cacheReuse(Connection c, List<String> out) throws Exception {
        long total = 0;
        for (int k = 0; k < CACHED_PREPARES; k++) {
            try (PreparedStatement ps = c.prepareStatement("SELECT ? * 2, ?")) {
                ps.setInt(1, k);
                ps.setString(2, "k" + k);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    total += rs.getLong(1);
                }
            }
        }
        out.add("total " + total);
        query(c, out, "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'");
        query(c, out, "SHOW SESSION STATUS LIKE 'Com_stmt_close'");
    }
}

// The legacy claim flow written with MariaDB Connector/J batches, run by it_batches.py through claimguard:
//   rewrite: each user reads, writes the stale literal (remain - 1) per campaign, and records its orders
//            with one executeBatch (rewriteBatchedStatements=true: one multi-row INSERT); twice each.
//   multi:   each user sends "UPDATE ... remain = remain - 1 ...; INSERT ..." in one Statement.execute
//            (allowMultiQueries=true, as MyBatis <foreach> does); twice each.
//   bulk:    as rewrite, the order rows' batch sent as COM_STMT_BULK_EXECUTE (useServerPrepStmts=true&
//            useBulkStmts=true: MariaDB's array binding), the reads and writes as server-side prepared statements.
//   bulkdup: user 900 claims campaignA, then takes 3 units and sends a bulk of orders for users 901, 903, 902
//            (903's order is in the database already: the plain INSERT fails whole, every unit goes back), then
//            takes 3 again for 901, 900, 902 as INSERT IGNORE (900's row is skipped, its unit goes back): prints
//            what each batch got.
//   bulkstock: one user's batch of stock decrements (UPDATE coupon_stock ... WHERE campaign_id = ?) as
//            COM_STMT_BULK_EXECUTE: prints the error the batch got.
// Answers claimguard gives on purpose (1644: sold out, already claimed) are the app's normal outcomes;
// anything else is printed as "unexpected" and makes the exit code 1.
// Arguments: mode host port1 port2 user password database campaignA campaignB users
import java.sql.*;
import java.util.*;
import java.util.concurrent.atomic.AtomicInteger;

public final class ClaimBatches {
    static final int ER_CLAIMGUARD = 1644;
    static final AtomicInteger unexpected = new AtomicInteger();

    static String url(String host, String port, String db, String options) {
        return "jdbc:mariadb://" + host + ":" + port + "/" + db + "?" + options;
    }

    static boolean ours(SQLException e) {
        for (Throwable t = e; t != null; t = t.getCause())
            if (t instanceof SQLException && ((SQLException) t).getErrorCode() == ER_CLAIMGUARD) return true;
        return false;
    }

    static void rewriteUser(Connection c, int uid, int[] campaigns) throws SQLException {
        for (int attempt = 0; attempt < 2; ++attempt) {
            List<Integer> got = new ArrayList<>();
            for (int campaign : campaigns) {
                int remain;
                try (PreparedStatement read = c.prepareStatement("SELECT remain FROM coupon_stock WHERE campaign_id = ?")) {
                    read.setInt(1, campaign);
                    try (ResultSet rs = read.executeQuery()) {
                        rs.next();
                        remain = rs.getInt(1);
                    }
                }
                if (remain <= 0) continue;
                try (PreparedStatement write = c.prepareStatement("UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?")) {
                    write.setInt(1, remain - 1);
                    write.setInt(2, campaign);
                    write.executeUpdate();
                    got.add(campaign);
                } catch (SQLException e) {
                    if (!ours(e)) throw e;
                }
            }
            if (got.isEmpty()) continue;
            try (PreparedStatement insert = c.prepareStatement("INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)")) {
                for (int campaign : got) {
                    insert.setInt(1, uid);
                    insert.setInt(2, campaign);
                    insert.addBatch();
                }
                insert.executeBatch();
            } catch (SQLException e) {
                if (!ours(e)) throw e;
            }
        }
    }

    static void multiUser(Connection c, int uid, int[] campaigns) throws SQLException {
        for (int attempt = 0; attempt < 2; ++attempt) {
            for (int campaign : campaigns) {
                try (Statement st = c.createStatement()) {
                    st.execute("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = " + campaign
                               + "; INSERT INTO coupon_order (user_id, campaign_id) VALUES (" + uid + ", " + campaign + ")");
                    while (st.getMoreResults() || st.getUpdateCount() != -1) {
                    }
                } catch (SQLException e) {
                    if (!ours(e)) throw e;
                }
            }
        }
    }

    public static void main(String[] a) throws Exception {
        final String mode = a[0], host = a[1], port1 = a[2], port2 = a[3], user = a[4], password = a[5], db = a[6];
        final int[] campaigns = {Integer.parseInt(a[7]), Integer.parseInt(a[8])};
        final int users = Integer.parseInt(a[9]);
        if (mode.equals("bulkdup")) {
            try (Connection c = DriverManager.getConnection(url(host, port1, db, "useServerPrepStmts=true&useBulkStmts=true"), user, password);
                 Statement st = c.createStatement()) {
                final String take = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = " + campaigns[0];
                st.executeUpdate(take);
                st.executeUpdate("INSERT INTO coupon_order (user_id, campaign_id) VALUES (900, " + campaigns[0] + ")");
                for (String verb : new String[] {"INSERT", "INSERT IGNORE"}) {
                    for (int i = 0; i < 3; ++i) st.executeUpdate(take);
                    try (PreparedStatement insert = c.prepareStatement(verb + " INTO coupon_order (user_id, campaign_id) VALUES (?, ?)")) {
                        for (int uid : new int[] {901, verb.equals("INSERT") ? 903 : 900, 902}) {
                            insert.setInt(1, uid);
                            insert.setInt(2, campaigns[0]);
                            insert.addBatch();
                        }
                        System.out.println(verb + ": " + Arrays.toString(insert.executeBatch()));
                    } catch (SQLException e) {
                        System.out.println(verb + ": " + e.getErrorCode() + " " + e.getMessage());
                    }
                }
            }
            return;
        }
        if (mode.equals("bulkstock")) {
            try (Connection c = DriverManager.getConnection(url(host, port1, db, "useServerPrepStmts=true&useBulkStmts=true"), user, password);
                 PreparedStatement take = c.prepareStatement("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = ?")) {
                for (int campaign : campaigns) {
                    take.setInt(1, campaign);
                    take.addBatch();
                }
                take.executeBatch();
                System.out.println("bulk: no error");
            } catch (SQLException e) {
                System.out.println("bulk: " + e.getErrorCode() + " " + e.getMessage());
            }
            return;
        }
        final String options = mode.equals("rewrite") ? "useServerPrepStmts=false&rewriteBatchedStatements=true&useBulkStmts=false"
                               : mode.equals("bulk")  ? "useServerPrepStmts=true&useBulkStmts=true&rewriteBatchedStatements=false"
                                                      : "allowMultiQueries=true";
        List<Thread> threads = new ArrayList<>();
        for (int uid = 1; uid <= users; ++uid) {
            final int id = uid;
            Thread t = new Thread(() -> {
                try (Connection c = DriverManager.getConnection(url(host, id % 2 == 0 ? port1 : port2, db, options), user, password)) {
                    if (mode.equals("rewrite") || mode.equals("bulk")) rewriteUser(c, id, campaigns);
                    else multiUser(c, id, campaigns);
                } catch (SQLException e) {
                    unexpected.incrementAndGet();
                    System.out.println("unexpected: user " + id + ": " + e.getErrorCode() + " " + e.getMessage());
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) t.join();
        System.out.println(mode + ": unexpected " + unexpected.get());
        System.exit(unexpected.get() == 0 ? 0 : 1);
    }
}

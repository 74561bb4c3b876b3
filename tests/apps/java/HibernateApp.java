// HibernateApp.java: the coupon flow with Hibernate 3.6 as its users write it: a @Version entity, a c3p0 pool,
// MariaDB Connector/J. get the stock, setRemain(remain - 1), save the order, commit (the UPDATE carries
// AND version = ?); on StaleObjectStateException (or a deadlock) roll back and retry, as users do; a duplicate
// key is the app's own "already claimed" (the post-mortem's hand fix). Correct on its own:
// through claimguard it must stay correct (a lost version race is not "sold out").
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Date;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

import javax.persistence.Column;
import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.GenerationType;
import javax.persistence.Id;
import javax.persistence.Table;
import javax.persistence.Version;

import org.hibernate.Session;
import org.hibernate.SessionFactory;
import org.hibernate.StaleObjectStateException;
import org.hibernate.Transaction;
import org.hibernate.cfg.Configuration;

public class HibernateApp {
    static final int MAX_TRIES = 5;             // a typical @Retryable(maxAttempts = 5)
    static final int MAX_DISTINCT_ERRORS = 50;
    static final int POOL_MAX = 10;
    static final int ER_DUP_ENTRY = 1062;
    static final int ER_LOCK_DEADLOCK = 1213;

    @Entity
    @Table(name = "coupon_stock")
    public static class Stock {
        @Id @Column(name = "campaign_id") public Long campaignId;
        @Column(name = "remain") public int remain;
        @Version @Column(name = "version") public int version;
    }

    @Entity
    @Table(name = "coupon_order")
    public static class CouponOrder {
        @Id @GeneratedValue(strategy = GenerationType.IDENTITY) public Long id;
        @Column(name = "user_id") public long userId;
        @Column(name = "campaign_id") public long campaignId;
        @Column(name = "created_at") public Date createdAt;
    }

    static final class Trace { String statement = ""; }

    static String claim(SessionFactory sf, long campaign, long user, Trace trace) {
        for (int tries = 1; ; tries++) {
            Session s = sf.openSession();
            Transaction tx = null;
            try {
                tx = s.beginTransaction();
                trace.statement = "SELECT";
                Stock stock = (Stock) s.get(Stock.class, campaign);
                if (stock == null || stock.remain <= 0) {
                    tx.rollback();
                    return "sold_out_app";
                }
                stock.remain = stock.remain - 1;
                CouponOrder order = new CouponOrder();
                order.userId = user;
                order.campaignId = campaign;
                order.createdAt = new Date();
                trace.statement = "INSERT";
                s.save(order);                  // IDENTITY: the INSERT is sent here
                trace.statement = "COMMIT";
                tx.commit();                    // the UPDATE ... WHERE campaign_id = ? AND version = ?
                return "claimed";
            } catch (StaleObjectStateException e) {
                rollback(tx);
                if (tries >= MAX_TRIES) return "conflicts";   // "please try again", the app's own answer
            } catch (RuntimeException e) {
                rollback(tx);
                int code = sqlCode(e);
                if (code == ER_DUP_ENTRY) return "conflicts";   // the app's own "already claimed"
                if (code == ER_LOCK_DEADLOCK) {                 // retried, as Spring's @Retryable does
                    if (tries >= MAX_TRIES) return "conflicts";
                    continue;
                }
                throw e;
            } finally {
                s.close();
            }
        }
    }

    static int sqlCode(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause())
            if (c instanceof SQLException) return ((SQLException) c).getErrorCode();
        return 0;
    }

    static void rollback(Transaction tx) {
        try {
            if (tx != null && tx.isActive()) tx.rollback();
        } catch (RuntimeException ignored) {
            // the connection is gone; the pool discards it
        }
    }

    static SessionFactory pod(Map<String, String> a, int port) {
        Configuration cfg = new Configuration()
            .addAnnotatedClass(Stock.class)
            .addAnnotatedClass(CouponOrder.class)
            .setProperty("hibernate.connection.driver_class", "org.mariadb.jdbc.Driver")
            .setProperty("hibernate.connection.url",
                         "jdbc:mariadb://" + a.get("host") + ":" + port + "/" + a.get("database"))
            .setProperty("hibernate.connection.username", a.get("user"))
            .setProperty("hibernate.connection.password", a.get("password"))
            .setProperty("hibernate.dialect", "org.hibernate.dialect.MySQL5InnoDBDialect")
            .setProperty("hibernate.connection.provider_class", "org.hibernate.connection.C3P0ConnectionProvider")
            .setProperty("hibernate.c3p0.min_size", "1")
            .setProperty("hibernate.c3p0.max_size", String.valueOf(POOL_MAX))
            .setProperty("hibernate.c3p0.timeout", "300")
            .setProperty("hibernate.c3p0.max_statements", "0");
        return cfg.buildSessionFactory();
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    public static void main(String[] argv) throws Exception {
        System.setProperty("com.mchange.v2.log.MLog", "com.mchange.v2.log.FallbackMLog");
        System.setProperty("com.mchange.v2.log.FallbackMLog.DEFAULT_CUTOFF_LEVEL", "WARNING");
        Map<String, String> a = new HashMap<>();
        a.put("host", "127.0.0.1");
        a.put("campaign", "1");
        a.put("threads", "24");
        a.put("users", "300");
        a.put("first-user", "1");
        a.put("attempts", "3");
        a.put("seed", "1");
        a.put("variant", "version");
        for (int i = 0; i + 1 < argv.length; i += 2) a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        long campaign = Long.parseLong(a.get("campaign"));
        int threads = Integer.parseInt(a.get("threads"));
        List<Long> plan = new ArrayList<>();
        long first = Long.parseLong(a.get("first-user"));
        for (long u = first; u < first + Integer.parseInt(a.get("users")); u++)
            for (int k = 0; k < Integer.parseInt(a.get("attempts")); k++) plan.add(u);
        Collections.shuffle(plan, new Random(Long.parseLong(a.get("seed"))));

        List<SessionFactory> pods = new ArrayList<>();
        for (String p : a.get("ports").split(",")) pods.add(pod(a, Integer.parseInt(p)));

        AtomicInteger next = new AtomicInteger();
        Map<String, Integer> counts = new HashMap<>();
        Map<List<Object>, Integer> errors = new HashMap<>();
        List<Long> claimedUsers = new ArrayList<>();
        java.util.TreeSet<Long> alreadyClaimed = new java.util.TreeSet<>();   // told claimguard's "already claimed"
        int[] attempts = {0};
        long began = System.nanoTime();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            SessionFactory sf = pods.get(t % pods.size());
            Thread w = new Thread(() -> {
                Trace trace = new Trace();
                for (int i = next.getAndIncrement(); i < plan.size(); i = next.getAndIncrement()) {
                    long user = plan.get(i);
                    trace.statement = "";
                    String kind = null;
                    List<Object> key = null;
                    try {
                        kind = claim(sf, campaign, user, trace);
                    } catch (RuntimeException e) {
                        int code = 0;
                        String message = e.getClass().getSimpleName() + ": " + e.getMessage();
                        for (Throwable c = e; c != null; c = c.getCause()) {
                            if (c instanceof SQLException) {
                                code = ((SQLException) c).getErrorCode();
                                message = c.getMessage();
                                break;
                            }
                        }
                        key = List.of(trace.statement, code, message.replaceAll("[0-9]+", "N"));
                    }
                    synchronized (counts) {
                        attempts[0]++;
                        if (kind != null) {
                            counts.merge(kind, 1, Integer::sum);
                            if (kind.equals("claimed")) claimedUsers.add(user);
                        } else {
                            if (((String) key.get(2)).contains("claimguard: already claimed")) alreadyClaimed.add(user);
                            if (!errors.containsKey(key) && errors.size() >= MAX_DISTINCT_ERRORS)
                                key = List.of(key.get(0), key.get(1), "(other messages)");
                            errors.merge(key, 1, Integer::sum);
                        }
                    }
                }
            });
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) w.join();
        double elapsed = (System.nanoTime() - began) / 1e9;
        for (SessionFactory sf : pods) sf.close();

        Collections.sort(claimedUsers);
        StringBuilder out = new StringBuilder("{\"app\": \"hibernate\", \"variant\": ").append(json(a.get("variant")));
        out.append(", \"attempts_planned\": ").append(plan.size()).append(", \"attempts\": ").append(attempts[0]);
        for (String k : new String[] {"claimed", "sold_out_app", "conflicts"})
            out.append(", \"").append(k).append("\": ").append(counts.getOrDefault(k, 0));
        out.append(", \"claimed_users\": ").append(claimedUsers);
        out.append(", \"already_claimed_users\": ").append(new ArrayList<>(alreadyClaimed));
        out.append(", \"errors\": [");
        String sep = "";
        for (Map.Entry<List<Object>, Integer> e : errors.entrySet()) {
            List<Object> k = e.getKey();
            out.append(sep).append("{\"statement\": ").append(json((String) k.get(0))).append(", \"code\": ")
               .append(k.get(1)).append(", \"message\": ").append(json((String) k.get(2))).append(", \"count\": ")
               .append(e.getValue()).append('}');
            sep = ", ";
        }
        out.append("], \"setup_errors\": [], \"elapsed_s\": ").append(elapsed).append('}');
        System.out.println(out);
        System.exit(0);
    }
}

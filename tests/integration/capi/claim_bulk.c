/* A claim INSERT with MariaDB Connector/C array binding (STMT_ATTR_ARRAY_SIZE: one COM_STMT_BULK_EXECUTE), run by
 * it_batches.py through claimguard: the bulk of two orders before any take (the exhausted answer, nothing sent),
 * then two takes and the same bulk executed again (libmariadb sends the parameter types with the first bulk only:
 * the sidecar adds them, the server never saw the first). Prints what each execute got.
 * With firstUser "large": one bulk of more than 16 MiB (several wire frames) of orders, which the sidecar does not
 * read: refused by the rule's unmodeled policy, never forwarded unread.
 * Arguments: host port user password database campaign firstUser|large */
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void execute(MYSQL_STMT *s, const char *label) {
    int rc = mysql_stmt_execute(s);
    printf("%s: %d %u %s affected=%lld\n", label, rc, mysql_stmt_errno(s), mysql_stmt_error(s),
           (long long)mysql_stmt_affected_rows(s));
}

int main(int argc, char **argv) {
    if (argc != 8) return 2;
    const int campaign = atoi(argv[6]), first = atoi(argv[7]); /* 0 for "large" */
    MYSQL *m = mysql_init(NULL);
    const int large = strcmp(argv[7], "large") == 0;
    const unsigned long max_packet = 64ul * 1024ul * 1024ul;
    mysql_optionsv(m, MYSQL_OPT_MAX_ALLOWED_PACKET, &max_packet);
    if (!mysql_real_connect(m, argv[1], argv[3], argv[4], argv[5], (unsigned)atoi(argv[2]), NULL, 0)) {
        printf("connect: %s\n", mysql_error(m));
        return 1;
    }
    MYSQL_STMT *s = mysql_stmt_init(m);
    const char *sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)";
    if (mysql_stmt_prepare(s, sql, strlen(sql)) != 0) {
        printf("prepare: %s\n", mysql_stmt_error(s));
        return 1;
    }
    if (large) {
        /* 2,000,000 rows of two INTs: 10 bytes each on the wire (an indicator and 4 bytes per value). */
        enum { n = 2000000 };
        static int many_users[n], many_campaigns[n];
        for (int i = 0; i < n; ++i) {
            many_users[i] = 1000000 + i;
            many_campaigns[i] = campaign;
        }
        unsigned int size = n;
        mysql_stmt_attr_set(s, STMT_ATTR_ARRAY_SIZE, &size);
        MYSQL_BIND lb[2];
        memset(lb, 0, sizeof lb);
        lb[0].buffer_type = MYSQL_TYPE_LONG;
        lb[0].buffer = many_users;
        lb[1].buffer_type = MYSQL_TYPE_LONG;
        lb[1].buffer = many_campaigns;
        mysql_stmt_bind_param(s, lb);
        execute(s, "large");
        mysql_stmt_close(s);
        mysql_close(m);
        return 0;
    }
    int users[2] = {first, first + 1}, campaigns[2] = {campaign, campaign};
    unsigned int rows = 2;
    mysql_stmt_attr_set(s, STMT_ATTR_ARRAY_SIZE, &rows);
    MYSQL_BIND b[2];
    memset(b, 0, sizeof b);
    b[0].buffer_type = MYSQL_TYPE_LONG;
    b[0].buffer = users;
    b[1].buffer_type = MYSQL_TYPE_LONG;
    b[1].buffer = campaigns;
    mysql_stmt_bind_param(s, b);
    execute(s, "before the takes");
    char take[128];
    snprintf(take, sizeof take, "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %d", campaign);
    for (int i = 0; i < 2; ++i)
        if (mysql_query(m, take) != 0) printf("take: %s\n", mysql_error(m));
    execute(s, "after the takes");
    mysql_stmt_close(s);
    mysql_close(m);
    return 0;
}

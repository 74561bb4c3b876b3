// Dev aid for the protocol tests: drives libmariadb through tools/record_relay.py so real client packets get recorded.
#include <mysql.h>
#include <stdio.h>
#include <string.h>
#define CHECK(x) do { if (x) { fprintf(stderr, "%d: %s\n", __LINE__, mysql_error(m)); return 1; } } while (0)
#define SCHECK(x) do { if (x) { fprintf(stderr, "%d: %s\n", __LINE__, mysql_stmt_error(st)); return 1; } } while (0)
int main(void) {
    MYSQL *m = mysql_init(NULL);
    CHECK(!mysql_real_connect(m, "127.0.0.1", "cg", "pw", "cg", 33072, NULL, CLIENT_MULTI_STATEMENTS));
    MYSQL_STMT *st = mysql_stmt_init(m);
    const char *q = "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?";
    SCHECK(mysql_stmt_prepare(st, q, strlen(q)));
    signed char ti = -5; unsigned short us = 65535; int l = -2000000000;
    unsigned long long ull = 18446744073709551615ULL; float f = 1.5f; double d = -2.25;
    char s[] = "h\xc3\xa9llo"; unsigned long slen = 6; char b[] = {0, 1, 2}; unsigned long blen = 3;
    MYSQL_TIME date = {2024, 2, 29, 0, 0, 0, 0, 0, MYSQL_TIMESTAMP_DATE};
    MYSQL_TIME dtm = {2024, 2, 29, 13, 14, 15, 123456, 0, MYSQL_TIMESTAMP_DATETIME};
    MYSQL_TIME tm = {0, 0, 34, 22, 59, 58, 999999, 1, MYSQL_TIMESTAMP_TIME};
    MYSQL_BIND p[12]; memset(p, 0, sizeof p);
    p[0].buffer_type = MYSQL_TYPE_TINY; p[0].buffer = &ti;
    p[1].buffer_type = MYSQL_TYPE_SHORT; p[1].buffer = &us; p[1].is_unsigned = 1;
    p[2].buffer_type = MYSQL_TYPE_LONG; p[2].buffer = &l;
    p[3].buffer_type = MYSQL_TYPE_LONGLONG; p[3].buffer = &ull; p[3].is_unsigned = 1;
    p[4].buffer_type = MYSQL_TYPE_FLOAT; p[4].buffer = &f;
    p[5].buffer_type = MYSQL_TYPE_DOUBLE; p[5].buffer = &d;
    p[6].buffer_type = MYSQL_TYPE_STRING; p[6].buffer = s; p[6].length = &slen;
    p[7].buffer_type = MYSQL_TYPE_BLOB; p[7].buffer = b; p[7].length = &blen;
    p[8].buffer_type = MYSQL_TYPE_NULL;
    p[9].buffer_type = MYSQL_TYPE_DATE; p[9].buffer = &date;
    p[10].buffer_type = MYSQL_TYPE_DATETIME; p[10].buffer = &dtm;
    p[11].buffer_type = MYSQL_TYPE_TIME; p[11].buffer = &tm;
    SCHECK(mysql_stmt_bind_param(st, p));
    SCHECK(mysql_stmt_execute(st));
    SCHECK(mysql_stmt_store_result(st));
    mysql_stmt_free_result(st);
    ti = 7;
    SCHECK(mysql_stmt_execute(st));   /* second execute: types not resent */
    SCHECK(mysql_stmt_store_result(st));
    mysql_stmt_free_result(st);
    SCHECK(mysql_stmt_send_long_data(st, 6, "long ", 5));
    SCHECK(mysql_stmt_send_long_data(st, 6, "data", 4));
    SCHECK(mysql_stmt_execute(st));
    SCHECK(mysql_stmt_store_result(st));
    SCHECK(mysql_stmt_reset(st));
    SCHECK(mysql_stmt_close(st));
    /* cursor + fetch */
    st = mysql_stmt_init(m);
    q = "SELECT a, b FROM t3 WHERE a > ?";
    SCHECK(mysql_stmt_prepare(st, q, strlen(q)));
    unsigned long ct = CURSOR_TYPE_READ_ONLY, pre = 2;
    mysql_stmt_attr_set(st, STMT_ATTR_CURSOR_TYPE, &ct);
    mysql_stmt_attr_set(st, STMT_ATTR_PREFETCH_ROWS, &pre);
    int zero = 0; MYSQL_BIND p1; memset(&p1, 0, sizeof p1);
    p1.buffer_type = MYSQL_TYPE_LONG; p1.buffer = &zero;
    SCHECK(mysql_stmt_bind_param(st, &p1));
    SCHECK(mysql_stmt_execute(st));
    int a; char bb[32]; unsigned long bl; my_bool bn;
    MYSQL_BIND r[2]; memset(r, 0, sizeof r);
    r[0].buffer_type = MYSQL_TYPE_LONG; r[0].buffer = &a;
    r[1].buffer_type = MYSQL_TYPE_STRING; r[1].buffer = bb; r[1].buffer_length = sizeof bb; r[1].length = &bl; r[1].is_null = &bn;
    SCHECK(mysql_stmt_bind_result(st, r));
    int rows = 0, rc;
    while ((rc = mysql_stmt_fetch(st)) == 0) rows++;
    printf("cursor rows %d rc %d\n", rows, rc);
    SCHECK(mysql_stmt_close(st));
    MYSQL_RES *res = mysql_list_fields(m, "t3", NULL); if (res) mysql_free_result(res);
    printf("stat %s\n", mysql_stat(m));
    CHECK(mysql_ping(m));
    CHECK(mysql_set_server_option(m, MYSQL_OPTION_MULTI_STATEMENTS_OFF));
    CHECK(mysql_change_user(m, "cg", "pw", "cg"));
    CHECK(mysql_reset_connection(m));
    CHECK(mysql_query(m, "SELECT 1"));
    mysql_free_result(mysql_store_result(m));
    mysql_close(m);
    /* second connection without a database */
    m = mysql_init(NULL);
    CHECK(!mysql_real_connect(m, "127.0.0.1", "cg", "pw", NULL, 33072, NULL, 0));
    mysql_close(m);
    return 0;
}

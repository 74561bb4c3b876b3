// mysqljs_app.js: the legacy coupon flow with mysqljs (npm `mysql`) createPool + pool.query, as its users
// write it: each pool.query borrows a connection for that one statement and gives it back.
'use strict';
const mysql = require('mysql');
const zoo = require('./zoo');

function query(pool, sql, values) {
  return new Promise((resolve, reject) => {
    pool.query(sql, values, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

zoo.run({
  name: 'mysqljs',
  async pod(port, args) {
    return mysql.createPool({host: args.host, port, user: args.user, password: args.password,
                             database: args.database});
  },
  async attempt(pool, user, trace, args) {
    trace.statement = 'SELECT';
    const rows = await query(pool, 'SELECT remain FROM coupon_stock WHERE campaign_id = ?', [args.campaign]);
    const remain = rows.length ? Number(rows[0].remain) : 0;
    if (remain <= 0) return 'sold_out_app';
    trace.statement = 'UPDATE';
    await query(pool, 'UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?', [remain - 1, args.campaign]);
    trace.statement = 'INSERT';
    await query(pool, 'INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (?, ?, NOW())',
                [user, args.campaign]);
    return 'claimed';
  },
  async close(pool) {
    await new Promise((resolve) => pool.end(() => resolve()));
  },
});

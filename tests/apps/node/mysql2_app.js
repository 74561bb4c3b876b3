// mysql2_app.js: the legacy coupon flow with mysql2's createPool, as its users write it: pool.query (text,
// client-side placeholders) or pool.execute (server-side prepared; JS numbers are bound as DOUBLE). The pool
// lends a connection per statement, so the read and the write may go on different connections.
'use strict';
const mysql = require('mysql2/promise');
const zoo = require('./zoo');

zoo.run({
  name: 'mysql2',
  async pod(port, args) {
    if (!['query', 'execute'].includes(args.variant)) throw new Error('--variant query|execute');
    return mysql.createPool({host: args.host, port, user: args.user, password: args.password,
                             database: args.database});
  },
  async attempt(pool, user, trace, args) {
    const run = args.variant === 'execute' ? pool.execute.bind(pool) : pool.query.bind(pool);
    trace.statement = 'SELECT';
    const [rows] = await run('SELECT remain FROM coupon_stock WHERE campaign_id = ?', [args.campaign]);
    const remain = rows.length ? Number(rows[0].remain) : 0;
    if (remain <= 0) return 'sold_out_app';
    trace.statement = 'UPDATE';
    await run('UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?', [remain - 1, args.campaign]);
    trace.statement = 'INSERT';
    await run('INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (?, ?, NOW())',
              [user, args.campaign]);
    return 'claimed';
  },
  async close(pool) {
    await pool.end();
  },
});

-- pushchat:no-transaction
-- Claims, lease renewals and returns update a row in place (HOT updates: no new index entries), so a notification
-- costs PostgreSQL about one ordinary update more than the stamp of time_sent (issue 18). Two things make that
-- possible: no index names claimed_until (claims find pending rows through push_queue_pending_idx, starting from
-- the daemon's cursor, and skip rows in flight on the table; returning expired leases scans the pending rows), and
-- every page keeps room for a second version of each of its rows (fillfactor 50: a claim rewrites up to 2,000 rows,
-- often every row of a page, before any old version can be pruned). Sent rows take about twice the disk of a
-- full page; `pushchat-api queue prune` keeps the history bounded. Outside a transaction, so a running queue keeps
-- draining; safe to run again.
DROP INDEX CONCURRENTLY IF EXISTS push_queue_claimable_idx;
DROP INDEX CONCURRENTLY IF EXISTS push_queue_in_flight_idx;
ALTER TABLE push_queue SET (fillfactor = 50);

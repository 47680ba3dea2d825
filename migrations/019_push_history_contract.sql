-- pushchat:contract
-- pushchat:no-transaction
-- Step two of two (contract; 018_push_history.sql is step one): from now on the daemons move the rows they are done
-- with to push_history (they check for this migration), and `queue prune` moves rows stamped in place before it. The
-- indexes only older releases' claims used go (claims walk push_queue_bulk_pending_idx): every queued row wrote four
-- index entries it never needed. Applied by `pushchat-api migrate --contract` only (a fresh database gets it at once):
-- releases from before push_history read only push_queue and would no longer see the rows that moved (the guide's
-- section 16).
DROP INDEX CONCURRENTLY IF EXISTS push_queue_pending_idx;
DROP INDEX CONCURRENTLY IF EXISTS push_queue_app_pending_idx;
DROP INDEX CONCURRENTLY IF EXISTS push_queue_lane_pending_idx;

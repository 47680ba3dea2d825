import Logging
import Settings
import Storage

/// What every connection's ``SenderDriver`` (whatever its destination) shares with the others and the service: the
/// queue, where results go, the rows held under lease, the wake-up and shutdown signals, the figures and the
/// readiness status.
struct WorkerContext: Sendable {
    let settings: PushSettings
    let pollInterval: Duration
    /// The rows this context's drivers claim (``PushQueue`` in the daemon).
    let rows: any RowSource
    let outcomes: Outcomes
    let held: HeldRows
    let signal: QueueSignal
    let shutdown: ShutdownFlag
    let metrics: PushMetrics
    let status: PushStatus
    let logger: Logger
    /// `push_broadcast_rate`: the daemon's budget for broadcast rows, shared by all its connections (nil: no limit).
    var broadcastRate: BroadcastRate? = nil
    /// Told when a claim of broadcast rows comes back full (the webhook deliverer holds back fresh events meanwhile).
    var pressure: BroadcastPressure? = nil
    /// Where a broadcast's lanes run (`push_broadcast_nice`; nil: on the shared threads, as every other lane).
    var broadcastThreads: BroadcastThreads? = nil
    /// The turns a broadcast's claims take, one at a time, across the daemon's connections (nil: each claims at once).
    var broadcastClaims: ClaimGate? = nil

    /// The same context for one app's sender: its queue (its rows, its claim cursor) and its own stop, which the
    /// service also raises at graceful shutdown.
    func forApp(_ app: String, platform: Platform = .apns, shutdown: ShutdownFlag) -> WorkerContext {
        with(rows: rows.forApp(app, platform: platform), shutdown: shutdown)
    }

    /// The same context for one kind of its lane's rows (``PushQueue/Traffic``), with claim cursors of its own.
    func forTraffic(_ traffic: PushQueue.Traffic) -> WorkerContext {
        with(rows: rows.forTraffic(traffic), shutdown: shutdown)
    }

    /// The same context over `rows`.
    func with(rows: any RowSource) -> WorkerContext { with(rows: rows, shutdown: shutdown) }

    private func with(rows: any RowSource, shutdown: ShutdownFlag) -> WorkerContext {
        WorkerContext(
            settings: settings,
            pollInterval: pollInterval,
            rows: rows,
            outcomes: outcomes,
            held: held,
            signal: signal,
            shutdown: shutdown,
            metrics: metrics,
            status: status,
            logger: logger,
            broadcastRate: broadcastRate,
            pressure: pressure,
            broadcastThreads: broadcastThreads,
            broadcastClaims: broadcastClaims
        )
    }
}

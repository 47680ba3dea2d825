import Settings
import Storage

/// What the two workers (``BinaryWorker``, ``HTTP2Worker``) are: one kept-open gateway connection at a time, fed from
/// the shared queue, reconnecting with backoff until graceful shutdown, over one ``WorkerContext``.
protocol PushWorker: Sendable {
    var context: WorkerContext { get }
    /// Runs until graceful shutdown, then gives back what it holds.
    func run() async
}

extension PushWorker {
    var settings: PushSettings { context.settings }
    var pollInterval: Duration { context.pollInterval }
    var queue: PushQueue { context.queue }
    var outcomes: Outcomes { context.outcomes }
    var held: HeldRows { context.held }
    var signal: QueueSignal { context.signal }
    var shutdown: ShutdownFlag { context.shutdown }
    var metrics: PushMetrics { context.metrics }
    var status: PushStatus { context.status }
}

import NIOCore

/// When an HTTP connection must have made progress, by the phase it is in: a client gets `header` to send a
/// request's head (from the connection's start, or from the first byte after an idle pause), `body` to send its
/// body, and may keep a connection open between requests for `idle`. While the server works on an answer there is
/// no deadline. A pure value, tested apart from sockets; ``ConnectionGuard`` drives it.
struct ConnectionDeadline: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        /// Waiting for a request head; `started` once its first bytes arrived.
        case awaitingHead(started: Bool)
        /// `answered`: the server answered before the body ended (a 404, 401, 413, 429 …); the body still has to end
        /// within `body`, and then the connection is idle, not waiting for an answer that was already sent.
        case readingBody(answered: Bool)
        /// The request is in; the answer is ours to send.
        case answering
    }

    let header: TimeAmount
    let body: TimeAmount
    let idle: TimeAmount
    private(set) var phase: Phase
    /// When the connection is closed unless the phase moves on first; nil while answering.
    private(set) var deadline: NIODeadline?

    /// A new connection: the first request's head is due within `header`.
    init(header: TimeAmount, body: TimeAmount, idle: TimeAmount, now: NIODeadline) {
        self.header = header
        self.body = body
        self.idle = idle
        phase = .awaitingHead(started: true)
        deadline = now + header
    }

    mutating func bytesArrived(now: NIODeadline) {
        guard case .awaitingHead(started: false) = phase else { return }
        phase = .awaitingHead(started: true)
        deadline = min(deadline ?? now + header, now + header)
    }

    mutating func headReceived(now: NIODeadline) {
        phase = .readingBody(answered: false)
        deadline = now + body
    }

    /// The request's last byte is in: the answer is ours to send, or, if it went out already, the connection is idle.
    mutating func requestEnded(now: NIODeadline) {
        if phase == .readingBody(answered: true) {
            phase = .awaitingHead(started: false)
            deadline = now + idle
            return
        }
        phase = .answering
        deadline = nil
    }

    /// The answer is written: the connection may sit idle for the next request (or, answered early, it must still
    /// finish sending the body within its deadline).
    mutating func answered(now: NIODeadline) {
        if phase == .readingBody(answered: false) {
            phase = .readingBody(answered: true)
            return
        }
        phase = .awaitingHead(started: false)
        deadline = now + idle
    }

    func hasExpired(now: NIODeadline) -> Bool { deadline.map { now >= $0 } ?? false }
}

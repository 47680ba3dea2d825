import APNs
import APNsTransport
import Foundation
import HTTP2Client
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Settings
import Support

/// Apple's legacy binary interface as a ``Destination``: command 2 frames over TLS with the provider's client
/// certificate. The gateway never acknowledges; ``BinaryLink`` makes its answers (silence, or an error response).
struct BinaryDestination: Destination {
    let connector: BinaryConnector
    let encoder: BinaryEncoder
    let settings: PushSettings

    var endpoint: String { "\(connector.endpoint)" }
    var interface: String { "" }
    var opensConnectionsOnDemand: Bool { false }

    func withLink<Result: Sendable>(_ body: (BinaryLink) async -> Result) async throws -> Result {
        let (channel, alarm) = try await connector.connect()
        return try await channel.executeThenClose { inbound, outbound in
            await body(BinaryLink(destination: self, channel: channel.channel, inbound: inbound, outbound: outbound, alarm: alarm))
        }
    }

    func encode(_ row: QueuedNotification, now: Date) -> Encoding<BinaryEncoder.Frame> {
        switch encoder.frame(row, now: now) {
        case .success(let frame): .request(frame)
        case .failure(let reason): .invalid(reason.description)
        }
    }

    /// What the error response means for the row it names.
    func verdict(_ response: BinaryErrorResponse, for row: QueuedNotification) -> Verdict {
        let status = "\(response.status.rawValue)"
        switch response.status {
        case .invalidToken:
            // Not valid for this topic and environment: the notification fails, the user stays (only the feedback
            // service's tuples delete users on this interface).
            return .failed(Verdict.Failure(status: status, reason: "invalid token", kind: "invalid_token", wrongEnvironment: true))
        case .processingError, .unknown:
            if row.retries < settings.maxRetries {
                return .again(reason: "gateway status \(response.status)", countsAsRetry: true)
            }
            return .failed(
                Verdict.Failure(
                    status: status,
                    reason: "\(response.status) after \(row.retries) retries",
                    kind: response.status.metricLabel
                )
            )
        default:
            return .failed(Verdict.Failure(status: status, reason: response.status.description, kind: response.status.metricLabel))
        }
    }
}

/// One kept-open gateway connection: frames written in one TLS write per batch; rows accepted by silence after
/// `push_settle`; an error response or a drop settles the window (``BinaryLinkState``).
final class BinaryLink: DestinationLink {
    let destination: BinaryDestination
    let channel: any Channel
    let inbound: NIOAsyncChannelInboundStream<ByteBuffer>
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    /// Raised (on the event loop) the moment the gateway sends anything: from then on nothing settles by silence.
    let alarm: GatewayAlarm
    private let state: NIOLockedValueBox<BinaryLinkState>
    /// A write completed (there is something new to settle), or the connection stopped.
    private let written = QueueSignal()

    init(
        destination: BinaryDestination,
        channel: any Channel,
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        alarm: GatewayAlarm
    ) {
        self.destination = destination
        self.channel = channel
        self.inbound = inbound
        self.outbound = outbound
        self.alarm = alarm
        state = NIOLockedValueBox(BinaryLinkState(capacity: destination.settings.window))
    }

    var settings: PushSettings { destination.settings }
    /// The whole window at once (the driver's slow start keeps it lower after a drop).
    var initialWindow: Int { settings.window }
    /// At shutdown the gateway gets a moment to object to what was written last.
    var drainTimeout: Duration { min(settings.settle, .seconds(1)) }

    func run(_ report: @escaping @Sendable (LinkEvent) -> Void) async {
        let read = await withTaskGroup(of: BinaryLinkState.End?.self) { group in
            group.addTask { await self.settleBySilence(report) }
            group.addTask { await self.read() }
            var end: BinaryLinkState.End?
            while end == nil, let next = await group.next() { end = next }
            state.withLockedValue { $0.stop() }
            written.signal()
            group.cancelAll()
            return end ?? .closed("the connection ended", refused: false)
        }
        try? await channel.close()
        let events = state.withLockedValue { state in state.end(state.end(reading: read), verdict: destination.verdict(_:for:)) }
        for event in events { report(event) }
    }

    func send(_ frames: [BinaryEncoder.Frame]) async -> Bool {
        guard state.withLockedValue({ $0.append(frames.map { $0.notification }) }) else { return false }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(frames.count * (BinaryFrame.frameSize(payloadLength: 0) + 256))
        for frame in frames { frame.write(into: &buffer) }
        // A gateway that stops reading leaves this write waiting for the socket forever (and the rows' leases renewed
        // forever): past push_stall_timeout the connection counts as dead, and its window is sent again elsewhere.
        let bytes = buffer
        do {
            try await withDeadline(settings.stallTimeout) { try await self.outbound.write(bytes) }
        } catch is DeadlineExceeded {
            state.withLockedValue { $0.stalled(GatewayStall(limit: settings.stallTimeout).description) }
            try? await channel.close()
            return true
        } catch {
            // The connection is gone; the reader reports how.
            return true
        }
        state.withLockedValue { $0.restampLast(frames.count, at: .now) }
        written.signal()
        return true
    }

    func close() async {
        state.withLockedValue { $0.drain() }
        try? await channel.close()
    }

    /// Reads until an error response or the end of the connection.
    private func read() async -> BinaryLinkState.End {
        var buffer = ByteBuffer()
        do {
            for try await chunk in inbound {
                buffer.writeImmutableBuffer(chunk)
                if let response = try BinaryErrorResponse.read(from: &buffer) { return .errorResponse(response) }
            }
            return .closed("the gateway closed the connection without an error response", refused: false)
        } catch {
            return .closed(GatewayError.describe(error), refused: GatewayError.isRefusal(error))
        }
    }

    /// Reports rows out for `push_settle` without an error response as accepted, until the connection stops.
    private func settleBySilence(_ report: @Sendable (LinkEvent) -> Void) async -> BinaryLinkState.End? {
        while !Task.isCancelled {
            let generation = written.generation
            let (settled, oldest, stopped) = state.withLockedValue { state in
                (state.settle(writtenBefore: .now - settings.settle, alarmRaised: alarm.isRaised), state.oldestWrite, state.stopped)
            }
            if stopped { break }
            if !settled.isEmpty { report(.answered(settled.map { Answer($0, .sent) })) }
            let due = oldest.map { max(.milliseconds(1), $0 + settings.settle - .now) } ?? .seconds(1)
            await written.wait(after: generation, timeout: min(due, .seconds(1)))
        }
        return nil
    }
}

extension BinaryErrorResponse.Status {
    /// `invalid token` → `invalid_token`.
    var metricLabel: String { String(name.map { $0 == " " ? "_" : $0 }) }
}

/// The binary gateway took no bytes for `push_stall_timeout` while a write waited: it stopped reading.
struct GatewayStall: PushChatError {
    typealias Code = ErrorCode<GatewayStall>
    var code: Code { .stalled }
    let limit: Duration
    var reason: String { "the gateway took no bytes for \(limit.formatted) (it stopped reading)" }
    var description: String { reason }
}

extension ErrorCode where Domain == GatewayStall {
    static let stalled = Self("stalled")
}

import APNs
import APNsTransport
import Foundation
import HTTP2Client
import NIOCore

/// One HTTP/2 connection, to APNs or FCM: ``HTTP2ClientHandler`` writes the streams and reports their answers, which
/// the destination's `verdict` classifies.
struct HTTP2Link: DestinationLink {
    let channel: any Channel
    let handler: NIOLoopBound<HTTP2ClientHandler>
    let events: AsyncStream<HTTP2Event>
    let drainTimeout: Duration
    let verdict: @Sendable (HTTP2Answer) -> Verdict

    /// One stream until the server's SETTINGS say how many.
    var initialWindow: Int { 1 }

    /// Opens a connection with `connector`, runs `body` while it is open, then closes it.
    static func open<Result: Sendable>(
        _ connector: HTTP2Connector,
        drainTimeout: Duration,
        _ body: (HTTP2Link) async -> Result,
        verdict: @escaping @Sendable (HTTP2Answer) -> Verdict
    ) async throws -> Result {
        let (channel, handler, events) = try await connector.connect()
        let link = HTTP2Link(channel: channel, handler: handler, events: events, drainTimeout: drainTimeout, verdict: verdict)
        let result = await body(link)
        await link.close()
        return result
    }

    func run(_ report: @escaping @Sendable (LinkEvent) -> Void) async {
        var closed = false
        for await event in events {
            switch event {
            case .answered(let answers):
                report(.answered(answers.map { Answer($0.request.notification, verdict($0)) }))
            case .unanswered(let requests, let reason):
                report(.unanswered(requests.map(\.notification), reason: reason))
            case .timedOut(let requests, let timeout):
                report(.timedOut(requests.map(\.notification), after: timeout))
            case .maxStreams(let value):
                report(.window(value))
            case .goingAway(let reason):
                report(.goingAway(reason))
            case .closed(let reason, let ending):
                closed = true
                report(.closed(reason, LinkEnding(ending)))
            }
        }
        if !closed { report(.closed("the connection ended", .dropped)) }
    }

    func send(_ requests: [HTTP2Request]) async -> Bool {
        let handler = self.handler
        return (try? await handler.eventLoop.submit { handler.value.send(requests) }.get()) == true
    }

    /// GOAWAY(NO_ERROR), then the connection closes.
    func close() async {
        let handler = self.handler
        try? await handler.eventLoop.submit { handler.value.close() }.get()
        try? await channel.closeFuture.get()
    }
}

extension LinkEnding {
    init(_ ending: HTTP2Ending) {
        switch ending {
        case .orderly: self = .orderly
        case .dropped: self = .dropped
        case .refused, .notHTTP2: self = .refused
        case .stalled: self = .stalled
        }
    }
}

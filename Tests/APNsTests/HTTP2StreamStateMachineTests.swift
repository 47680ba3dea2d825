import APNsTransport
import Foundation
import NIOCore
import NIOHTTP2
import Testing

@testable import APNs
@testable import HTTP2Client

/// The HTTP/2 connection's bookkeeping without a channel: every request comes out once, answered or unanswered.
@Suite struct HTTP2StreamStateMachineTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func requests(_ ids: ClosedRange<Int64>) throws -> [HTTP2Request] {
        try ids.map { try HTTP2ClientHandlerTests.request($0) }
    }

    static func machine(lastStreamID: Int = HTTP2StreamStateMachine.defaultLastStreamID) -> HTTP2StreamStateMachine {
        HTTP2StreamStateMachine(requestTimeout: .seconds(10), pingInterval: .seconds(30), lastStreamID: lastStreamID, now: start)
    }

    static func written(_ action: HTTP2StreamStateMachine.SendAction) -> (ids: [Int], unanswered: [Int64], retired: Bool)? {
        guard case .write(let streams, let unanswered, _, let retired) = action else { return nil }
        return (streams.map { Int($0.0) }, unanswered.map(\.notification.messageID), retired)
    }

    static func ids(_ requests: [HTTP2Request]) -> [Int64] { requests.map(\.notification.messageID) }

    @Test func requestsTakeOddStreamIDsAndEachAnswerEndsItsStream() throws {
        var machine = Self.machine()
        let sent = try #require(Self.written(machine.send(try Self.requests(1...3), now: Self.start)))
        #expect(sent.ids == [1, 3, 5])
        #expect(sent.unanswered.isEmpty && !sent.retired)
        let result1 = machine.headers(3, status: 200, endStream: false)
        #expect(result1 == nil, "not ended yet")
        let answerValue = machine.data(3, ByteBuffer(string: "").readableBytesView, endStream: true)
        let answer = try #require(answerValue)
        #expect(answer.request.notification.messageID == 2)
        #expect(answer.status == 200)
        let result2 = machine.headers(1, status: 410, endStream: false)
        #expect(result2 == nil)
        let body = ByteBuffer(string: #"{"reason":"Unregistered"}"#)
        let refusedValue = machine.data(1, body.readableBytesView, endStream: true)
        let refused = try #require(refusedValue)
        #expect(HTTP2Result(refused).reason == "Unregistered")
        #expect(machine.inFlight == 1)
        let result3 = machine.headers(99, status: 200, endStream: true)
        #expect(result3 == nil, "a stream we never opened answers nothing")
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS was only passed up to the worker: a lowered limit it had not heard of yet was
    /// exceeded. Now no stream opens past it; what does not fit comes back unanswered, to be sent again.
    @Test func theServersStreamLimitIsObeyedWhateverIsOffered() throws {
        var machine = Self.machine()
        machine.maxConcurrentStreams(2)
        let first = try #require(Self.written(machine.send(try Self.requests(1...5), now: Self.start)))
        #expect(first.ids == [1, 3] && first.unanswered == [3, 4, 5])
        #expect(machine.inFlight == 2)
        _ = machine.headers(1, status: 200, endStream: true)
        let second = try #require(Self.written(machine.send(try Self.requests(3...4), now: Self.start)))
        #expect(second.ids == [5] && second.unanswered == [4], "one stream ended, one opens")
        machine.maxConcurrentStreams(0)
        _ = machine.headers(3, status: 200, endStream: true)
        let none = try #require(Self.written(machine.send(try Self.requests(4...4), now: Self.start)))
        #expect(none.ids.isEmpty && none.unanswered == [4])
        if case .write(_, _, let reason, _) = machine.send(try Self.requests(4...4), now: Self.start) {
            #expect(reason.contains("MAX_CONCURRENT_STREAMS"))
        }
    }

    @Test func goAwayInTheMiddleOfAWindowGivesBackOnlyTheUnprocessedStreams() throws {
        var machine = Self.machine()
        _ = machine.send(try Self.requests(1...6), now: Self.start)  // streams 1, 3, 5, 7, 9, 11
        let refused = machine.goAway(lastStreamID: 5)
        #expect(Self.ids(refused) == [4, 5, 6], "streams 7, 9, 11 were not processed: safe to send again")
        #expect(machine.inFlight == 3, "1, 3 and 5 are still answered")
        let after = try #require(Self.written(machine.send(try Self.requests(7...8), now: Self.start)))
        #expect(after.ids.isEmpty)
        #expect(after.unanswered == [7, 8], "no new streams after GOAWAY")
        let result4 = machine.headers(5, status: 200, endStream: true)
        #expect(result4?.request.notification.messageID == 3)
        #expect(Self.ids(machine.finish() ?? []) == [1, 2])
    }

    @Test func aResetStreamGivesItsRequestBackOnce() throws {
        var machine = Self.machine()
        _ = machine.send(try Self.requests(1...2), now: Self.start)
        let result5 = machine.reset(3)
        #expect(result5?.notification.messageID == 2)
        let result6 = machine.reset(3)
        #expect(result6 == nil, "once")
        let result7 = machine.headers(3, status: 200, endStream: true)
        #expect(result7 == nil, "a late answer on a reset stream is ignored")
        #expect(machine.inFlight == 1)
    }

    @Test func aTimeoutExpiresOnlyTheStreamsPastTheirDeadline() throws {
        var machine = Self.machine()
        _ = machine.send(try Self.requests(1...2), now: Self.start)
        _ = machine.send(try Self.requests(3...3), now: Self.start + .seconds(5))
        let result8 = machine.tick(now: Self.start + .seconds(9))
        #expect(result8.expired.isEmpty)
        let late = machine.tick(now: Self.start + .seconds(10))
        #expect(late.expired.map { Int($0.0) } == [1, 3])
        #expect(late.expired.map(\.1.notification.messageID) == [1, 2])
        #expect(machine.inFlight == 1)
        let result9 = machine.tick(now: Self.start + .seconds(15))
        #expect(result9.expired.map(\.1.notification.messageID) == [3])
    }

    @Test func aSlowAnswerWithinTheDeadlineIsAnAnswerAndKeepsTheConnectionAlive() throws {
        var machine = Self.machine()
        _ = machine.send(try Self.requests(1...1), now: Self.start)
        let result10 = machine.tick(now: Self.start + .seconds(8))
        #expect(result10.expired.isEmpty)
        machine.read(now: Self.start + .seconds(9))
        let result11 = machine.headers(1, status: 200, endStream: true)
        #expect(result11 != nil)
        let quiet = machine.tick(now: Self.start + .seconds(38))
        #expect(!quiet.ping, "29 s since the last frame")
    }

    @Test func aQuietConnectionIsPingedAndClosedWhenThePingGoesUnanswered() {
        var machine = Self.machine()
        let result12 = machine.tick(now: Self.start + .seconds(31))
        #expect(result12.ping)
        #expect(!machine.tick(now: Self.start + .seconds(32)).ping, "one PING at a time")
        machine.pingAnswered()
        machine.read(now: Self.start + .seconds(33))
        let result13 = machine.tick(now: Self.start + .seconds(64))
        #expect(result13.ping)
        let result14 = machine.tick(now: Self.start + .seconds(70))
        #expect(result14.close == nil)
        let result15 = machine.tick(now: Self.start + .seconds(75))
        #expect(result15.close == "the server did not answer a PING")
    }

    /// Stream ids run out after 2^30 requests (about 7.5 hours at 40,000/s): the connection is retired before the
    /// last id — what does not fit comes back to go out on a new connection — instead of trapping.
    @Test func aConnectionNearItsLastStreamIDIsRetiredAndNothingIsLost() throws {
        var machine = Self.machine(lastStreamID: 9)  // streams 1, 3, 5, 7, 9
        let first = try #require(Self.written(machine.send(try Self.requests(1...3), now: Self.start)))
        #expect(first.ids == [1, 3, 5] && !first.retired)
        let second = try #require(Self.written(machine.send(try Self.requests(4...7), now: Self.start)))
        #expect(second.ids == [7, 9])
        #expect(second.unanswered == [6, 7])
        #expect(second.retired, "the worker hears GOAWAY-like news and opens another connection")
        let third = try #require(Self.written(machine.send(try Self.requests(8...8), now: Self.start)))
        #expect(third.ids.isEmpty && third.unanswered == [8] && !third.retired)
        #expect(machine.inFlight == 5, "what was written is still answered")
        var real = Self.machine()
        #expect(Self.written(real.send(try Self.requests(1...1), now: Self.start))?.ids == [1], "the default allows 2^31 − 1")
    }

    @Test func theEndGivesBackEverythingWaitingOnceAndRefusesMore() throws {
        var machine = Self.machine()
        _ = machine.send(try Self.requests(1...3), now: Self.start)
        let result16 = machine.headers(3, status: 200, endStream: true)
        #expect(result16 != nil)
        #expect(Self.ids(machine.finish() ?? []) == [1, 3])
        let result17 = machine.finish()
        #expect(result17 == nil, "once")
        guard case .refused = machine.send(try Self.requests(4...4), now: Self.start) else {
            Issue.record("a finished connection takes nothing")
            return
        }
    }

    @Test func aLongAnswerBodyIsCappedNotKept() throws {
        var machine = Self.machine()
        _ = machine.send(try Self.requests(1...1), now: Self.start)
        _ = machine.headers(1, status: 400, endStream: false)
        let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 3000)
        let result18 = machine.data(1, chunk.readableBytesView, endStream: false)
        #expect(result18 == nil)
        let answerValue = machine.data(1, chunk.readableBytesView, endStream: true)
        let answer = try #require(answerValue)
        #expect(answer.status == 400)
        #expect(HTTP2Result(answer).reason == nil, "the padding is no JSON")
        #expect(HTTP2StreamStateMachine.maxAnswerBody == 4096)
    }
}

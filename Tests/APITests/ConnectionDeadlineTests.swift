import NIOCore
import Testing

@testable import API

@Suite struct ConnectionDeadlineTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func aNewConnectionMustSendItsHeadInTime() {
        let deadline = ConnectionDeadline(header: .seconds(30), body: .seconds(20), idle: .seconds(60), now: start)
        #expect(deadline.deadline == start + .seconds(30))
        #expect(!deadline.hasExpired(now: start + .seconds(29)))
        #expect(deadline.hasExpired(now: start + .seconds(30)))
    }

    @Test func eachPhaseHasItsOwnLimitAndAnsweringHasNone() {
        var deadline = ConnectionDeadline(header: .seconds(30), body: .seconds(20), idle: .seconds(60), now: start)
        deadline.headReceived(now: start + .seconds(1))
        #expect(deadline.phase == .readingBody(answered: false))
        #expect(deadline.deadline == start + .seconds(21))
        deadline.requestEnded(now: start + .seconds(1))
        #expect(deadline.deadline == nil)
        #expect(!deadline.hasExpired(now: start + .seconds(3600)), "the server may take its time")
        deadline.answered(now: start + .seconds(2))
        #expect(deadline.phase == .awaitingHead(started: false))
        #expect(deadline.deadline == start + .seconds(62), "kept alive: the idle limit")
        // The next request's first bytes: from then on its head must come within the header limit.
        deadline.bytesArrived(now: start + .seconds(10))
        #expect(deadline.deadline == start + .seconds(40))
        deadline.bytesArrived(now: start + .seconds(20))
        #expect(deadline.deadline == start + .seconds(40), "more bytes do not extend it (a slow drip is cut)")
    }

    /// Answered before the body ended (a 404 to `GET /healthz` with `Content-Length: 1`, a 401, a 429): the body must
    /// still end within its limit, and once it has the connection is idle with the idle limit, never without one.
    @Test func anEarlyAnswerKeepsTheDeadlines() {
        var deadline = ConnectionDeadline(header: .seconds(2), body: .seconds(20), idle: .seconds(3), now: start)
        deadline.headReceived(now: start + .seconds(1))
        deadline.answered(now: start + .seconds(1))
        #expect(deadline.phase == .readingBody(answered: true))
        #expect(deadline.deadline == start + .seconds(21), "the rest of the body is still due")
        deadline.requestEnded(now: start + .seconds(5))
        #expect(deadline.phase == .awaitingHead(started: false))
        #expect(deadline.deadline == start + .seconds(8), "idle from the last byte: closed after 3 s more")
        #expect(deadline.hasExpired(now: start + .seconds(8)))
    }
}

import Testing

@testable import Storage

/// A read completion postgres-nio did not ask for is held to the end of the turn, and dropped if the connection went
/// inactive meanwhile (the server closed it while a result's rows waited: postgres-nio would trap).
@Suite struct ReadCompletionsTests {
    @Test func anAskedCompletionGoesOnAtOnce() {
        var completions = ReadCompletions()
        let first = completions.readComplete()
        #expect(first, "installed on an idle connection, which is reading")
        completions.read()
        let second = completions.readComplete()
        #expect(second && !completions.held)
    }

    @Test func anUnaskedCompletionWaitsForTheEndOfTheTurnAndGoesOnIfTheConnectionLives() {
        var completions = ReadCompletions()
        _ = completions.readComplete()
        let unasked = completions.readComplete()
        #expect(!unasked && completions.held, "no read asked since: held")
        let atTheEnd = completions.endOfTurn()
        #expect(atTheEnd, "still open: it goes on, as before")
        let again = completions.endOfTurn()
        #expect(!again, "once")
    }

    @Test func anUnaskedCompletionBeforeTheConnectionEndsIsDropped() {
        var completions = ReadCompletions()
        _ = completions.readComplete()
        _ = completions.readComplete()
        completions.channelInactive()
        let atTheEnd = completions.endOfTurn()
        #expect(!atTheEnd, "the statement fails with the connection; postgres-nio does not trap")
    }
}

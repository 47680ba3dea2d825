import NIOConcurrencyHelpers
import Testing

@testable import API
@testable import Settings
@testable import Storage

/// The scoped budget reservation against an in-memory store: what is taken, what comes back, and when.
@Suite struct ReservationTests {
    /// A budget of `units` that never refills, recording every take and refund.
    final class MemoryBudget: BudgetStore {
        private let state: NIOLockedValueBox<(units: Int, log: [String])>

        init(_ units: Int) { state = NIOLockedValueBox((units, [])) }

        var units: Int { state.withLockedValue { $0.units } }
        var log: [String] { state.withLockedValue { $0.log } }

        func take(_ amount: Int?) -> Reservation.Taken {
            state.withLockedValue { state in
                let wanted = amount ?? state.units
                guard wanted <= state.units else {
                    state.log.append("refused \(wanted)")
                    return .wait(.seconds(wanted - state.units))
                }
                state.units -= wanted
                state.log.append("took \(wanted)")
                return .taken(wanted)
            }
        }

        func refund(_ amount: Int) {
            state.withLockedValue { state in
                state.units += amount
                state.log.append("refunded \(amount)")
            }
        }
    }

    @Test func whatTheBodyDidNotUseComesBack() async throws {
        let budget = MemoryBudget(100)
        let outcome = try await Reservation.withReservation(60, from: budget) { reserved in
            #expect(reserved == 60)
            return 45
        } used: {
            $0
        }
        guard case .done(let used) = outcome else {
            Issue.record("refused")
            return
        }
        #expect(used == 45)
        #expect(budget.units == 55)
        #expect(budget.log == ["took 60", "refunded 15"])
    }

    @Test func tooLittleIsRefusedWithTheWaitAndTheBodyDoesNotRun() async throws {
        let budget = MemoryBudget(10)
        let outcome = try await Reservation.withReservation(25, from: budget) { _ -> Int in
            Issue.record("the body ran")
            return 0
        } used: {
            $0
        }
        guard case .refused(let wait) = outcome else {
            Issue.record("not refused")
            return
        }
        #expect(wait == .seconds(15))
        #expect(budget.units == 10)
        #expect(budget.log == ["refused 25"])
    }

    @Test func everythingHeldIsReservedWhenNoAmountIsGiven() async throws {
        let budget = MemoryBudget(30)
        _ = try await Reservation.withReservation(nil, from: budget) { reserved in
            #expect(reserved == 30)
            return 12
        } used: {
            $0
        }
        #expect(budget.units == 18)
    }

    @Test func aStatementThatSurelyWroteNothingGivesEverythingBack() async throws {
        let budget = MemoryBudget(100)
        await #expect(throws: DatabaseError.self) {
            _ = try await Reservation.withReservation(40, from: budget) { _ -> Int in
                throw DatabaseError(code: .unavailable, context: "test", reason: "down")
            } used: {
                $0
            }
        }
        #expect(budget.units == 100)
        #expect(budget.log == ["took 40", "refunded 40"])
    }

    @Test func aStatementThatMayHaveWrittenKeepsTheReservation() async throws {
        let budget = MemoryBudget(100)
        await #expect(throws: DatabaseError.self) {
            _ = try await Reservation.withReservation(40, from: budget) { _ -> Int in
                throw DatabaseError(code: .outcomeUnknown, context: "test", reason: "no answer")
            } used: {
                $0
            }
        }
        #expect(budget.units == 60, "it may have queued them: they stay paid")
        #expect(budget.log == ["took 40"])
    }

    @Test func theFanOutBudgetTakesFromBothBucketsOrNeither() {
        var limits = APILimits.unlimited
        limits.fanOutPerIP = 200  // 100 at once
        limits.fanOutPerUDID = 100  // 50 at once
        let budget = FanOutBudget(limits: limits)
        let sender = budget.sender(address: "192.0.2.1", udid: "a")
        #expect(sender.take(40) == .taken(40))
        guard case .wait = sender.take(20) else {
            Issue.record("the device's 50 are spent")
            return
        }
        // The address's bucket was not charged for the refused 20: another device from it still has 60 there.
        #expect(budget.sender(address: "192.0.2.1", udid: "b").take(50) == .taken(50))
        sender.refund(40)
        #expect(sender.take(50) == .taken(50), "the refund went back to the device's bucket")
    }
}

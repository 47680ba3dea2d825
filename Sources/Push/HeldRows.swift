import NIOConcurrencyHelpers

/// The message ids this daemon holds (claimed and not yet settled in the database), for lease renewal.
final class HeldRows: Sendable {
    private let ids = NIOLockedValueBox(Set<Int64>())

    func add<S: Sequence<Int64>>(_ new: S) { ids.withLockedValue { $0.formUnion(new) } }
    func remove<S: Sequence<Int64>>(_ done: S) { ids.withLockedValue { $0.subtract(done) } }
    var snapshot: [Int64] { ids.withLockedValue { Array($0) } }
    var count: Int { ids.withLockedValue { $0.count } }
}

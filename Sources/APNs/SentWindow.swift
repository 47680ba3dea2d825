package import NIOCore

/// The notifications written on the current binary connection that are not yet known to be accepted.
///
/// The binary interface never acknowledges: a notification counts as accepted once it has been out for the settle
/// time without an error response. An error response `8 | status | id` settles the window at once: everything
/// before `id` was processed, `id` itself failed (unless the status is 10, shutdown, where `id` was the last
/// accepted), and everything after it was discarded and must be sent again. A connection that drops without an
/// error response leaves the whole window to be sent again (the only source of duplicates).
///
/// The hot methods are specialised for the daemon's rows (`@_specialize`, exported): compiled only generic in this
/// module, each call looked up the ring's generic metadata, 8% of the binary daemon's CPU in a profile (1% after).
package struct SentWindow<Item>: Sendable where Item: Sendable {
    package struct Entry: Sendable {
        package let item: Item
        package let identifier: UInt32
        package var writtenAt: ContinuousClock.Instant

        @inlinable
        init(item: Item, identifier: UInt32, writtenAt: ContinuousClock.Instant) {
            self.item = item
            self.identifier = identifier
            self.writtenAt = writtenAt
        }
    }

    /// How an error response settles the window.
    package struct Resolution: Sendable {
        /// Processed before the failed one: sent.
        package var accepted: [Item] = []
        /// The notification the status is about (`nil` for shutdown, or an identifier not in the window).
        package var failed: Item?
        /// Discarded by the gateway: send again on a new connection.
        package var resend: [Item] = []
    }

    package let capacity: Int
    /// Oldest first. A ring: a settled entry (and the row it holds) is released as it leaves, not kept until the
    /// array is compacted.
    @usableFromInline var entries = CircularBuffer<Entry>()

    @inlinable
    package init(capacity: Int) {
        self.capacity = capacity
    }

    @inlinable
    package var count: Int { entries.count }
    @inlinable
    package var isEmpty: Bool { entries.isEmpty }
    @inlinable
    package var freeSpace: Int { max(0, capacity - count) }
    /// When the oldest entry was written.
    @inlinable
    package var oldestWrite: ContinuousClock.Instant? { entries.first?.writtenAt }

    @inlinable
    @_specialize(exported:true,where Item == QueuedNotification)
    package mutating func append(_ item: Item, identifier: UInt32, writtenAt: ContinuousClock.Instant) {
        entries.append(Entry(item: item, identifier: identifier, writtenAt: writtenAt))
    }

    /// Moves the write time of the newest `count` entries to `instant` (their write finished only then), in place (no
    /// copy of the rows they hold).
    @inlinable
    @_specialize(exported:true,where Item == QueuedNotification)
    package mutating func restampLast(_ count: Int, at instant: ContinuousClock.Instant) {
        var index = entries.index(entries.endIndex, offsetBy: -min(count, entries.count))
        while index != entries.endIndex {
            entries.modify(index) { $0.writtenAt = instant }
            entries.formIndex(after: &index)
        }
    }

    /// Removes and returns the entries written at or before `instant`, oldest first: accepted.
    @inlinable
    @_specialize(exported:true,where Item == QueuedNotification)
    package mutating func removeSettled(writtenBefore instant: ContinuousClock.Instant) -> [Item] {
        var settled: [Item] = []
        while let first = entries.first, first.writtenAt <= instant {
            settled.append(entries.removeFirst().item)
        }
        return settled
    }

    /// Settles the whole window according to an error response.
    package mutating func resolve(_ response: BinaryErrorResponse) -> Resolution {
        defer { entries.removeAll(keepingCapacity: true) }
        var resolution = Resolution()
        guard let index = entries.lastIndex(where: { $0.identifier == response.identifier }) else {
            // Not (or no longer) in the window: nothing is known about the rest, so all of it goes again.
            resolution.resend = entries.map(\.item)
            return resolution
        }
        if response.status == .shutdown || response.status == .noErrors {
            resolution.accepted = entries[...index].map(\.item)
        } else {
            resolution.accepted = entries[..<index].map(\.item)
            resolution.failed = entries[index].item
        }
        resolution.resend = entries[entries.index(after: index)...].map(\.item)
        return resolution
    }

    /// Empties the window, returning everything in it (the connection dropped: send again).
    package mutating func removeAllItems() -> [Item] {
        let items = entries.map(\.item)
        entries.removeAll(keepingCapacity: true)
        return items
    }

    package var items: [Item] { entries.map(\.item) }
}

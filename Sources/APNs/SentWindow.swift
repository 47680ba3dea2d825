import Settings
import Support

/// The notifications written on the current binary connection that are not yet known to be accepted.
///
/// The binary interface never acknowledges: a notification counts as accepted once it has been out for the settle
/// time without an error response. An error response `8 | status | id` settles the window at once: everything
/// before `id` was processed, `id` itself failed (unless the status is 10, shutdown, where `id` was the last
/// accepted), and everything after it was discarded and must be sent again. A connection that drops without an
/// error response leaves the whole window to be sent again (the only source of duplicates).
public struct SentWindow<Item>: Sendable where Item: Sendable {
    public struct Entry: Sendable {
        public let item: Item
        public let identifier: UInt32
        public let writtenAt: ContinuousClock.Instant
    }

    /// How an error response settles the window.
    public struct Resolution: Sendable {
        /// Processed before the failed one: sent.
        public var accepted: [Item] = []
        /// The notification the status is about (`nil` for shutdown, or an identifier not in the window).
        public var failed: Item?
        /// Discarded by the gateway: send again on a new connection.
        public var resend: [Item] = []
    }

    public let capacity: Int
    private var entries: [Entry] = []
    private var head = 0

    public init(capacity: Int) {
        self.capacity = capacity
    }

    public var count: Int { entries.count - head }
    public var isEmpty: Bool { count == 0 }
    public var freeSpace: Int { max(0, capacity - count) }
    /// When the oldest entry was written.
    public var oldestWrite: ContinuousClock.Instant? { head < entries.count ? entries[head].writtenAt : nil }

    public mutating func append(_ item: Item, identifier: UInt32, writtenAt: ContinuousClock.Instant) {
        entries.append(Entry(item: item, identifier: identifier, writtenAt: writtenAt))
    }

    /// Moves the write time of the newest `count` entries to `instant` (their write finished only then).
    public mutating func restampLast(_ count: Int, at instant: ContinuousClock.Instant) {
        let start = max(head, entries.count - count)
        for index in start..<entries.count {
            entries[index] = Entry(item: entries[index].item, identifier: entries[index].identifier, writtenAt: instant)
        }
    }

    /// Removes and returns the entries written at or before `instant`, oldest first: accepted.
    public mutating func removeSettled(writtenBefore instant: ContinuousClock.Instant) -> [Item] {
        var end = head
        while end < entries.count && entries[end].writtenAt <= instant { end += 1 }
        let settled = entries[head..<end].map(\.item)
        head = end
        compact()
        return settled
    }

    /// Settles the whole window according to an error response.
    public mutating func resolve(_ response: BinaryErrorResponse) -> Resolution {
        let live = entries[head...]
        defer { removeAll() }
        var resolution = Resolution()
        guard let index = live.lastIndex(where: { $0.identifier == response.identifier }) else {
            // Not (or no longer) in the window: nothing is known about the rest, so all of it goes again.
            resolution.resend = live.map(\.item)
            return resolution
        }
        if response.status == .shutdown || response.status == .noErrors {
            resolution.accepted = live[...index].map(\.item)
        } else {
            resolution.accepted = live[..<index].map(\.item)
            resolution.failed = live[index].item
        }
        resolution.resend = live[(index + 1)...].map(\.item)
        return resolution
    }

    /// Empties the window, returning everything in it (the connection dropped: send again).
    public mutating func removeAllItems() -> [Item] {
        let items = entries[head...].map(\.item)
        removeAll()
        return items
    }

    public var items: [Item] { entries[head...].map(\.item) }

    private mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        head = 0
    }

    private mutating func compact() {
        if head == entries.count {
            removeAll()
        } else if head > 4096 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}

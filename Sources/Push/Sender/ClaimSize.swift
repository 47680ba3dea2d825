/// How many rows a connection's next claim asks for (a value: tested without a database).
///
/// A claim's cost is mostly fixed: its commit waits for the WAL to reach the disk, and one claim is under way at a
/// time on a connection (in the field bench, about 4 ms a claim plus 6 µs a row: claims of 2,000 rows cap a binary
/// connection near 125,000 rows/s while its writer could send twice that). So the size follows the writer: it starts at
/// `push_batch_size`, doubles (up to ``ceiling``, `push_batch_max`) after each full claim during which the writer had places free and
/// nothing to write, halves back after a full claim the writer did not wait for, and is `push_batch_size` again as soon
/// as a claim comes back short (the backlog is gone). Where sending is the slower side (HTTP/2 at full load, a chat
/// during a broadcast) the writer never waits for rows and claims stay at `push_batch_size`: a longer claim statement
/// is what chat's statements would wait behind.
struct ClaimSize: Equatable, Sendable {
    /// `push_batch_size`.
    let base: Int
    /// The largest claim (`push_batch_max`).
    let ceiling: Int
    /// What the next claim asks for.
    private(set) var current: Int

    init(base: Int, ceiling: Int) {
        self.base = max(1, base)
        self.ceiling = max(self.base, ceiling)
        current = self.base
    }

    /// A claim that asked for `asked` rows came back with `count`; `writerWaited`: the writer had places free and no
    /// row to write while it was under way.
    mutating func claimed(count: Int, asked: Int, writerWaited: Bool) {
        if count < asked {
            current = base
        } else if writerWaited {
            current = min(ceiling, current * 2)
        } else {
            current = max(base, current / 2)
        }
    }
}

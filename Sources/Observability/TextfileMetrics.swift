import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A job that runs from a timer cannot be scraped: it leaves its figures in a file in the Prometheus text format, for
/// node_exporter's textfile collector. Only the job's own figures go in (no process or build series: node_exporter
/// exports its own, and a name twice fails the whole collector).
package enum TextfileMetrics {
    /// One gauge per figure: `pushchat.prune.rows_deleted` → `pushchat_prune_rows_deleted 42`.
    package static func exposition(_ figures: [(name: String, value: Double)]) -> [UInt8] {
        var text = ""
        for (name, value) in figures {
            let exported = MetricsRegistry.exportedName(name)
            let number = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
            text += "# TYPE \(exported) gauge\n\(exported) \(number)\n"
        }
        return Array(text.utf8)
    }

    /// Writes the exposition to `path` atomically (a scraper never reads half a file), readable by everyone: the
    /// units run with `UMask=0027`, and node_exporter reads the file as another user.
    package static func write(_ exposition: [UInt8], to path: String) throws {
        let temporary = path + ".tmp"
        try Data(exposition).write(to: URL(fileURLWithPath: temporary))
        do {
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: temporary)
            guard rename(temporary, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
    }
}

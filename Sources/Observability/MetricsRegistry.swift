package import CoreMetrics
import Foundation
package import Metrics
import NIOConcurrencyHelpers
package import Prometheus

/// One process's metrics, served as Prometheus text at `/metrics`.
///
/// Names are written in the OpenTelemetry style (`pushchat.push.sent`) and exported with dots turned into
/// underscores (`pushchat_push_sent`), since the Prometheus text format allows no dots. Every component gets its
/// registry passed in (no global bootstrap), so several servers in one test process never mix their figures.
package final class MetricsRegistry: Sendable {
    package let registry: PrometheusCollectorRegistry
    package let factory: PrometheusMetricsFactory
    private let counters = NIOLockedValueBox([String: CoreMetrics.Counter]())
    /// Figures read at each scrape rather than kept up to date (the database's state).
    private let collectors = NIOLockedValueBox([@Sendable () -> Void]())

    package init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.nameAndLabelSanitizer = { name, labels in (Self.exportedName(name), labels) }
        factory.defaultDurationHistogramBuckets = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        self.registry = registry
        self.factory = factory
        // Which release a process runs, for dashboards and for an upgrade's progress: 1, labelled with the version.
        gauge("pushchat.build_info", [("version", BuildInfo.version)]).record(1)
    }

    /// Runs `collect` before every scrape, to set figures read from elsewhere at that moment.
    package func onScrape(_ collect: @escaping @Sendable () -> Void) {
        collectors.withLockedValue { $0.append(collect) }
    }

    /// `pushchat.push.sent` → `pushchat_push_sent`.
    package static func exportedName(_ name: String) -> String {
        String(name.map { $0 == "." || $0 == "-" ? "_" : $0 })
    }

    /// A counter, cached by name and labels (labels such as a status or a reason take few values).
    package func counter(_ name: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
        let key = dimensions.isEmpty ? name : name + "|" + dimensions.map { "\($0.0)=\($0.1)" }.joined(separator: ",")
        return counters.withLockedValue { cache in
            if let counter = cache[key] { return counter }
            let counter = CoreMetrics.Counter(label: name, dimensions: dimensions, factory: factory)
            cache[key] = counter
            return counter
        }
    }

    package func gauge(_ name: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Gauge {
        CoreMetrics.Gauge(label: name, dimensions: dimensions, factory: factory)
    }

    package func meter(_ name: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Meter {
        CoreMetrics.Meter(label: name, dimensions: dimensions, factory: factory)
    }

    package func timer(_ name: String, _ dimensions: [(String, String)] = []) -> Metrics.Timer {
        Metrics.Timer(label: name, dimensions: dimensions, preferredDisplayUnit: .seconds, factory: factory)
    }

    /// The Prometheus text exposition of everything recorded so far, with the process's memory as of now
    /// (`process_resident_memory_bytes`, `pushchat_heap_in_use_bytes`, `pushchat_heap_retained_bytes`).
    package func exposition() -> [UInt8] {
        for collect in collectors.withLockedValue({ $0 }) { collect() }
        let memory = ProcessMemory.now()
        gauge("process.resident_memory_bytes").record(memory.resident)
        if memory.allocatorStatistics {
            gauge("pushchat.heap.in_use_bytes").record(memory.inUse)
            gauge("pushchat.heap.retained_bytes").record(memory.retained)
        }
        return registry.emitToBuffer()
    }

    /// The media type of ``exposition()``.
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}

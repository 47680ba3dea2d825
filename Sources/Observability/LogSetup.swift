import Foundation
package import Logging
package import Support

#if canImport(Glibc)
import Glibc
#endif

/// Process-wide logging: standard output plus the configured log file, at the configured level.
package enum LogSetup {
    /// Opens the log file (creating its folder) and bootstraps swift-log. Call once, from an executable.
    package static func bootstrap(
        label: String,
        level: Logger.Level,
        file: String?,
        fileSetting: String = "PUSHCHAT_LOG_FILE",
        format: LogFormat = .text
    ) throws(ConfigurationError) -> Logger {
        var descriptors: [Int32] = [STDOUT_FILENO]
        if let file {
            let directory = (file as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            let descriptor = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
            guard descriptor >= 0 else {
                throw ConfigurationError(
                    code: .invalidValue,
                    key: fileSetting,
                    reason: "cannot open '\(file)' for appending: \(String(cString: strerror(errno)))"
                )
            }
            descriptors.append(descriptor)
        }
        let sink = LineLogHandler.Sink(descriptors: descriptors)
        LoggingSystem.bootstrap { label in LineLogHandler(label: label, sink: sink, level: level, format: format) }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

/// How log lines look.
package enum LogFormat: String, Sendable {
    /// `2026-11-21T09:40:00.123Z info pushchat-push: Connection OK key=value`
    case text
    /// `{"time":"2026-11-21T09:40:00.123Z","level":"info","label":"pushchat-push","message":"Connection OK","key":"value"}`
    case json
}

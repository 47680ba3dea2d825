import Foundation
import Logging
import Testing

@testable import Observability
@testable import Settings
@testable import Support

@Suite struct LineLogHandlerTests {
    static func event(_ message: Logger.Message, _ metadata: Logger.Metadata) -> LogEvent {
        LogEvent(level: .warning, message: message, metadata: metadata, source: nil, file: #fileID, function: #function, line: #line)
    }

    @Test func jsonLinesCarryMessageAndMetadata() throws {
        let handler = LineLogHandler(label: "pushchat-push", sink: .init(descriptors: []), level: .info, format: .json)
        let line = handler.jsonLine(Self.event("Message 7 refused: \"bad\"", ["push.message_id": "7", "level": "spoof"]))
        #expect(line.hasSuffix("}\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["message"] == "Message 7 refused: \"bad\"")
        #expect(object["level"] == "warning")
        #expect(object["label"] == "pushchat-push")
        #expect(object["push.message_id"] == "7")
        #expect(object["time"]?.count == 24)
    }

    @Test func textLines() {
        let handler = LineLogHandler(label: "pushchat-api", sink: .init(descriptors: []), level: .info)
        let line = handler.textLine(Self.event("Connection OK", ["b": "2", "a": "1"]))
        #expect(line.dropFirst(25) == "warning pushchat-api: Connection OK a=1 b=2\n")
    }

    @Test func theFormatIsASetting() throws {
        let configuration = try Configuration.load(
            mode: .production,
            path: nil,
            environment: ["PUSHCHAT_DATABASE_URL": "postgres://u@h/db", "PUSHCHAT_LOG_FORMAT": "JSON"]
        )
        #expect(configuration.logFormat == .json)
        #expect(throws: ConfigurationError.self) {
            try Configuration.load(
                mode: .production,
                path: nil,
                environment: ["PUSHCHAT_DATABASE_URL": "postgres://u@h/db", "PUSHCHAT_LOG_FORMAT": "xml"]
            )
        }
    }

    @Test func timestampIsISO8601WithMilliseconds() throws {
        let stamp = LineLogHandler.timestamp()
        #expect(stamp.count == 24)
        #expect(stamp.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil)
        let parsed = try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(stamp)
        #expect(abs(parsed.timeIntervalSinceNow) < 5)
    }
}

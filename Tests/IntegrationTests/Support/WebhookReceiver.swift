import Foundation
import NIOConcurrencyHelpers
import Testing

/// `webhook_receiver.py` as a process: a receiver that checks signatures with Python's hmac (not the project's signer)
/// and reports each POST it got.
final class WebhookReceiver: Sendable {
    /// One POST as the receiver saw it.
    struct Post: Sendable {
        let n: Int
        let path: String
        /// `webhook-id`.
        let id: String
        let timestamp: String
        /// Seconds between `webhook-timestamp` and the receiver's clock.
        let age: Double
        let contentType: String?
        /// Signatures in `webhook-signature`.
        let signatures: Int
        /// Whether one of them verified with each `--secret`, in order.
        let verified: [Bool]
        /// Each event as JSON text, and its id and type.
        let events: [Event]
        /// What the receiver answered.
        let answer: Int
        /// `conforms`, or how the body breaks docs/openapi.yaml's WebhookDelivery schema.
        let schema: String
    }

    struct Event: Sendable {
        let id: String
        let type: String
        let timestamp: String
        /// `data`'s members, numbers and strings as text.
        let data: [String: String]
    }

    let process: Process
    let port: Int
    private let lines: NIOLockedValueBox<[String]>

    private init(process: Process, port: Int, lines: NIOLockedValueBox<[String]>) {
        self.process = process
        self.port = port
        self.lines = lines
    }

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("webhook_receiver.py").path
    }

    /// Starts a receiver and waits for its port.
    static func start(secrets: [String], fail: Int = 0, delay: Double = 0, port: Int? = nil) async throws -> WebhookReceiver {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var arguments = ["python3", script, "--fail", String(fail), "--delay", String(delay)]
        for secret in secrets { arguments += ["--secret", secret] }
        if let port { arguments += ["--port", String(port)] }
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        let lines = NIOLockedValueBox<[String]>([])
        try process.run()
        // A thread of its own reads the receiver's lines until it exits (blocking reads, no run loop needed).
        let handle = output.fileHandleForReading
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                buffer.append(chunk)
                var found: [String] = []
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    found.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
                lines.withLockedValue { $0 += found }
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let first = lines.withLockedValue({ $0.first }),
                let object = try? JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any],
                let port = object["port"] as? Int
            {
                return WebhookReceiver(process: process, port: port, lines: lines)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.terminate()
        throw CancellationError()
    }

    /// Every POST so far, in the order they came.
    var posts: [Post] {
        lines.withLockedValue { $0 }.dropFirst().compactMap(Self.post)
    }

    /// The events of every POST answered 2xx.
    var delivered: [Event] { posts.filter { (200..<300).contains($0.answer) }.flatMap(\.events) }

    static func post(_ line: String) -> Post? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
        let events = (object["events"] as? [[String: Any]] ?? []).map { event in
            Event(
                id: event["id"] as? String ?? "",
                type: event["type"] as? String ?? "",
                timestamp: event["timestamp"] as? String ?? "",
                data: (event["data"] as? [String: Any] ?? [:]).mapValues { "\($0)" }
            )
        }
        return Post(
            n: object["n"] as? Int ?? 0,
            path: object["path"] as? String ?? "",
            id: object["id"] as? String ?? "",
            timestamp: object["timestamp"] as? String ?? "",
            age: object["age"] as? Double ?? 0,
            contentType: object["content_type"] as? String,
            signatures: object["signatures"] as? Int ?? 0,
            verified: object["verified"] as? [Bool] ?? [],
            events: events,
            answer: object["answer"] as? Int ?? 0,
            schema: object["schema"] as? String ?? ""
        )
    }

    /// Stops the receiver (waitUntilExit can wait for ever on a task's thread here: the run loop it spins is not the
    /// one that hears of the exit).
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        for _ in 0..<500 where process.isRunning { usleep(10_000) }
    }

    deinit { stop() }
}

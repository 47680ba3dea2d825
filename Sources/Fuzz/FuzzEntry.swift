import API
import APNs
import APNsTransport
import Crypto
import FCM
import Foundation
import HTTP2Client
import NIOCore
import NIOEmbedded
import NIOHTTP2
import Settings
import Support
import WebPush

/// libFuzzer entry points for every parser of untrusted bytes: the API's form bodies (urlencoded and multipart), the
/// binary frame decoder (what the simulator reads from providers) and the gateway's error responses, and feedback
/// tuples, the provider API's JSON bodies, what Google sends (FCM's answers, the token endpoint's, service-account
/// files), and what an HTTP/2 server sends the push daemon (frames, header blocks, SETTINGS and WINDOW_UPDATE applied
/// to request bodies waiting for window, and the whole client handler with requests in flight), and Web Push's (a
/// browser's subscription JSON, a push service's answers, an `aes128gcm` body and a VAPID `Authorization` header, as the
/// simulator's push service reads them). `PUSHCHAT_FUZZ` picks one; each must never crash, hang or read out of bounds, whatever the bytes.
///
/// Built with libFuzzer by `scripts/fuzz.sh` (`--sanitize fuzzer --sanitize address`, `-D FUZZING`); built normally it
/// is `pushchat-fuzz`, a replayer, which runs every file of a corpus through the same code (what CI and the tests run).
enum FuzzTarget: String, CaseIterable {
    case forms, multipart, binary, feedback, provider, fcm, http2, http2client, webpush

    static var selected: FuzzTarget {
        FuzzTarget(rawValue: ProcessInfo.processInfo.environment["PUSHCHAT_FUZZ"] ?? "") ?? .forms
    }

    func run(_ bytes: UnsafeRawBufferPointer) {
        let buffer = ByteBuffer(bytes: bytes)
        switch self {
        case .forms:
            if let fields = try? FormFields.parse(body: buffer, contentType: "application/x-www-form-urlencoded") {
                _ = try? APIRequest(fields: fields)
            }
        case .multipart:
            // The first line is the boundary, the rest the body.
            let text = Array(bytes)
            let split = text.firstIndex(of: UInt8(ascii: "\n")) ?? text.count
            let boundary = String(decoding: text[..<split], as: UTF8.self)
            let body = ByteBuffer(bytes: text[min(split + 1, text.count)...])
            if let fields = try? FormFields.parse(body: body, contentType: "multipart/form-data; boundary=\(boundary)") {
                _ = try? APIRequest(fields: fields)
            }
        case .binary:
            var frames = buffer
            while (try? BinaryFrameDecoder.decode(&frames)) != nil {}
            var responses = buffer
            _ = try? BinaryErrorResponse.read(from: &responses)
        case .feedback:
            var tuples = buffer
            while (try? FeedbackTuple.read(from: &tuples)) != nil {}
        case .provider:
            // The provider API's bodies; and what the parser accepts serializes to JSON that parses to the same value.
            let body = Array(bytes)
            if let value = try? JSON.parse(body) {
                let again = try? JSON.parse(value.serialized)
                precondition(again == value, "JSON round trip changed the value")
            }
            _ = try? NotificationRequest(body: body, transport: .http2)
            _ = try? NotificationRequest(body: body, transport: .binary)
            _ = try? DeviceRegistration(body: body)
        case .fcm:
            // FCM's answer to a send under every status it gives (the first line as a Retry-After), the token
            // endpoint's answer, and the bytes as a service-account file.
            let body = Array(bytes)
            let retryAfter = String(decoding: body.prefix { $0 != UInt8(ascii: "\n") }.prefix(16), as: UTF8.self)
            for status in [200, 400, 401, 403, 404, 429, 500, 503] {
                let answer = FCMAnswer(status: status, body: body, retryAfter: retryAfter)
                _ = (answer.verdict, answer.statusText)
            }
            _ = AccessToken(body: body, now: Date())
            _ = try? ServiceAccount(json: Data(body), path: "fuzz")
        case .http2:
            // The server's bytes in two reads (split where the first byte says), with two bodies waiting for window.
            var reader = HTTP2FrameReader()
            var window = HTTP2SendWindow()
            var out = ByteBuffer()
            window.send(1, ByteBuffer(repeating: 1, count: 70_000), to: &out)
            window.send(3, ByteBuffer(repeating: 3, count: 100), to: &out)
            func read(_ input: inout ByteBuffer) throws(HTTP2ConnectionError) {
                while let frame = try reader.next(from: &input) {
                    switch frame {
                    case .settings(let settings): try window.settings(settings, to: &out)
                    case .windowUpdate(let stream, let increment): try window.windowUpdate(stream, increment: increment, to: &out)
                    case .rstStream(let stream, _): window.drop(stream)
                    default: break
                    }
                }
            }
            let split = min(Int(bytes.first ?? 0), bytes.count)
            var input = ByteBuffer(bytes: bytes.prefix(split))
            do {
                try read(&input)
                input.writeBytes(bytes[split...])
                try read(&input)
            } catch {
                return
            }
        case .http2client:
            HTTP2ClientFuzz.run(bytes)
        case .webpush:
            WebPushFuzz.run(Array(bytes))
        }
    }
}

/// The whole HTTP/2 client handler against a server's bytes: three requests in flight (one with a body larger than
/// the default window), the bytes in two reads (split where the first byte says), a timer tick, then the end of the
/// connection. Whatever the bytes, no trap, and every request comes back once (answered or unanswered).
enum HTTP2ClientFuzz {
    static let requests: [HTTP2Request] = (1...3).map { id in
        let notification = QueuedNotification(
            messageID: Int64(id),
            deviceToken: String(repeating: "ab", count: 32),
            payload: #"{"aps":{"alert":"hi"}}"#
        )
        let http2 = try! HTTP2Notification(notification, topic: "com.example.PushChat", defaultPriority: 10, defaultExpiry: 0, now: Date())
        return HTTP2Request(
            notification: notification,
            headers: HTTP2Request.headerBlock(http2, authority: "api.push.apple.com", authorization: nil),
            // The second body is larger than the default window: it waits for WINDOW_UPDATE.
            body: id == 2 ? ByteBuffer(repeating: 0x78, count: 70_000) : ByteBuffer(string: notification.payload),
            tokenGeneration: 0
        )
    }

    static func run(_ bytes: UnsafeRawBufferPointer) {
        let (events, continuation) = AsyncStream.makeStream(of: HTTP2Event.self)
        let handler = HTTP2ClientHandler(events: continuation, requestTimeout: .seconds(10))
        let channel = EmbeddedChannel(handler: handler)
        _ = try? channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        precondition(handler.send(requests), "a new connection takes requests")
        let split = min(Int(bytes.first ?? 0), bytes.count)
        if channel.isActive { channel.pipeline.fireChannelRead(ByteBuffer(bytes: bytes.prefix(split))) }
        if channel.isActive { channel.pipeline.fireChannelRead(ByteBuffer(bytes: bytes.dropFirst(split))) }
        if channel.isActive { channel.pipeline.fireChannelReadComplete() }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(300))
        _ = try? channel.finish()
        // Every request once: the stream is finished, so counting it ends.
        let counted = Counter()
        let done = DispatchSemaphore(value: 0)
        Task {
            for await event in events {
                switch event {
                case .answered(let answers): counted.add(answers.map(\.request.notification.messageID))
                case .unanswered(let requests, _), .timedOut(let requests, _): counted.add(requests.map(\.notification.messageID))
                default: break
                }
            }
            done.signal()
        }
        done.wait()
        precondition(counted.ids.sorted() == [1, 2, 3], "requests reported \(counted.ids), not each once")
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [Int64] = []
        func add(_ ids: [Int64]) { lock.withLock { values += ids } }
        var ids: [Int64] { lock.withLock { values } }
    }
}

/// Web Push's untrusted bytes: a subscription (what any caller registers: one that parses writes itself back the same,
/// with a token of its shape), a push service's answer under each status (the first line as `Retry-After`), an
/// `aes128gcm` body for a browser's fixed keys, a VAPID `Authorization` header, and a Declarative Web Push message.
enum WebPushFuzz {
    static let browser = try! P256.KeyAgreement.PrivateKey(rawRepresentation: [UInt8](repeating: 7, count: 32))
    static let auth = [UInt8](repeating: 9, count: 16)

    static func run(_ body: [UInt8]) {
        if let subscription = try? WebPushSubscription(json: body) {
            let again = try? WebPushSubscription(json: Array(subscription.json.utf8))
            precondition(again == subscription, "a subscription's JSON does not read back the same")
            precondition(WebPushSubscription.isToken(subscription.token), "a token of the wrong shape")
            _ = (subscription.origin, subscription.authority)
        }
        let retryAfter = String(decoding: body.prefix { $0 != UInt8(ascii: "\n") }.prefix(16), as: UTF8.self)
        for status in [201, 400, 401, 403, 404, 410, 413, 429, 500, 503] {
            _ = WebPushAnswer(status: status, body: body, retryAfter: retryAfter).verdict
        }
        _ = try? ContentEncryption.decrypt(body, userAgentKey: browser, authSecret: auth)
        let header = String(decoding: body, as: UTF8.self)
        _ = try? VAPIDToken.verify(authorization: header, audience: "https://push.example", now: Date())
        _ = WebPushMessage(json: body)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
package func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.selected.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

#if !FUZZING
/// `pushchat-fuzz [FILE|DIR]...` (built without libFuzzer): runs files (a corpus, or a crash libFuzzer saved) through the parser
/// `PUSHCHAT_FUZZ` names, without libFuzzer.
@main
enum Replay {
    static func main() {
        var count = 0
        for argument in CommandLine.arguments.dropFirst() {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else { continue }
            let files =
                isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: argument)) ?? []).sorted().map { argument + "/" + $0 }
                : [argument]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                data.withUnsafeBytes { FuzzTarget.selected.run($0) }
                count += 1
            }
        }
        print("replayed \(count) inputs through \(FuzzTarget.selected.rawValue)")
    }
}
#endif

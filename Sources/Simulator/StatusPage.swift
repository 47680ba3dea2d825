import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Support

/// The simulator's read-only HTTP status page on loopback: counters and the last notifications, so a person can
/// see what "arrived on the phone".
///
/// `GET /` (a page: the counters and a phone lock screen per device token, updating itself), `GET /screens` (the
/// part of it that updates), `GET /status.json` (counters and the last 20 as JSON), `GET /notifications?limit=N`
/// (the last N as JSON, at most the kept number), `POST /webhooks` (a backend's receiver of delivery events: counted,
/// the last shown on the page, signatures checked with `--webhook-secret`), `POST /browsers` (a browser subscribes,
/// with `{"app", "application_server_key"}`: the answer is its `PushSubscription.toJSON()`, an endpoint on the
/// browsers' push service) and `DELETE /browsers/ID` (it unsubscribes: 410 from then on).
enum StatusPage {
    static func withRunning<T: Sendable>(
        host: String,
        port: Int,
        state: SimulatorState,
        logger: Logger,
        _ body: (Int) async throws -> T
    ) async throws -> T {
        let router = Router()
        router.get("/") { _, _ in html(page(state)) }
        router.get("/screens") { _, _ in html(screens(state)) }
        router.get("/status.json") { _, _ in json(summary(state)) }
        router.post("/webhooks") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 4 << 20)
            let status = state.webhooks.receive(
                id: request.headers[HTTPField.Name("webhook-id")!],
                timestamp: request.headers[HTTPField.Name("webhook-timestamp")!],
                signature: request.headers[HTTPField.Name("webhook-signature")!],
                body: Array(buffer: body)
            )
            return Response(status: .init(code: status))
        }
        router.post("/browsers") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 65_536)
            let json = body.readableBytes == 0 ? nil : try? JSON.parse(Array(buffer: body))
            let app = json?["app"]?.stringValue ?? "PushChat"
            let key = json?["application_server_key"]?.stringValue
            guard body.readableBytes == 0 || json?.members != nil else {
                return Response(
                    status: .badRequest,
                    body: .init(byteBuffer: ByteBuffer(string: "expected {\"app\", \"application_server_key\"}\n"))
                )
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(
                status: .created,
                headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: state.webPush.subscribe(app: app, applicationServerKey: key) + "\n"))
            )
        }
        router.delete("/browsers/{id}") { _, context -> Response in
            let id = context.parameters.get("id") ?? ""
            return Response(status: state.webPush.unsubscribe(id) ? .noContent : .notFound)
        }
        router.get("/notifications") { request, _ in
            let limit = request.uri.queryParameters.get("limit", as: Int.self) ?? 100
            return json("[" + state.recent(limit: max(0, limit)).map(\.json).joined(separator: ",\n") + "]\n")
        }
        let (portStream, portContinuation) = AsyncStream.makeStream(of: Int.self)
        var quiet = logger
        quiet.logLevel = .warning
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "pushchat-apns-sim"),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: quiet
        )
        let serviceGroup = ServiceGroup(configuration: .init(services: [app], logger: quiet))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await serviceGroup.run() }
            var ports = portStream.makeAsyncIterator()
            guard let boundPort = await ports.next() else {
                throw SimulatorError(reason: "the status page could not listen on \(host):\(port)")
            }
            do {
                let result = try await body(boundPort)
                await serviceGroup.triggerGracefulShutdown()
                try await group.waitForAll()
                return result
            } catch {
                await serviceGroup.triggerGracefulShutdown()
                try? await group.waitForAll()
                throw error
            }
        }
    }

    static func summary(_ state: SimulatorState) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let counters = (try? encoder.encode(state.counters)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        let recent = state.recent(limit: 20).map(\.json).joined(separator: ",\n    ")
        let webhooks = (try? encoder.encode(state.webhooks.counters)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return "{\n  \"counters\": \(counters),\n  \"webhooks\": \(webhooks),\n  \"last\": [\n    \(recent)\n  ]\n}\n"
    }

    static func html(_ text: String) -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: text))
        )
    }

    static func json(_ text: String) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

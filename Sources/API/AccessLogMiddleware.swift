import APNs
import Hummingbird
import Logging
import Observability
import Settings
import Storage
import Support

/// One log line per request: method, path, status, duration and client address; refusals (4xx) sampled, a line a
/// second per status with the count of those left out (see ``RefusalSampler``).
struct AccessLogMiddleware<Context: RequestContext & RemoteAddressRequestContext>: RouterMiddleware {
    let refusals = RefusalSampler()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let status: HTTPResponse.Status
        do {
            let response = try await next(request, context)
            status = response.status
            log(request, context, status: status, since: start)
            return response
        } catch let error as any HTTPResponseError {
            log(request, context, status: error.status, since: start)
            throw error
        } catch {
            log(request, context, status: .internalServerError, since: start)
            throw error
        }
    }

    /// The path as logged: a device token in it (`DELETE /v1/devices/TOKEN`) shortened, as everywhere at info level.
    static func loggedPath(_ path: String) -> String {
        let prefix = "/v1/devices/"
        guard path.hasPrefix(prefix) else { return path }
        return prefix + DeviceToken.redacted(String(path.dropFirst(prefix.count)))
    }

    private func log(_ request: Request, _ context: Context, status: HTTPResponse.Status, since start: ContinuousClock.Instant) {
        var suffix = ""
        if (400..<500).contains(status.code) {
            let (log, suppressed) = refusals.admit(status: status.code)
            guard log else { return }
            if suppressed > 0 { suffix = " (and \(suppressed) more \(status.code) answers not logged)" }
        }
        let elapsed = start.duration(to: .now)
        let milliseconds = elapsed.seconds * 1000
        context.logger.info(
            "\(request.method) \(Self.loggedPath(request.uri.path)) \(status.code)\(suffix)",
            metadata: [
                "http.duration_ms": "\(milliseconds)",
                "client.address": "\(context.remoteAddress?.ipAddress ?? "-")",
            ]
        )
    }
}

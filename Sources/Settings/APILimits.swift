import Observability
import Support

/// The API's abuse limits: one `message` to a big room is an amplifier.
public struct APILimits: Sendable {
    /// Requests per second per client address (`api_rate_per_ip`; 0: no limit). Default 20.
    public var ratePerIP: Double = 20
    /// Requests a client address may send at once (`api_burst_per_ip`). Default 40.
    public var burstPerIP: Double = 40
    /// Requests per second per device (`api_rate_per_udid`; 0: no limit). Default 5.
    public var ratePerUDID: Double = 5
    /// Requests a device may send at once (`api_burst_per_udid`). Default 10.
    public var burstPerUDID: Double = 10
    /// Most devices in one room (`api_max_room_size`; 0: no limit): a `join` into a full room is refused. Default 10000.
    public var maxRoomSize = 10_000
    /// Largest request body in bytes (`api_max_body`); larger bodies get 413. Default 64 KiB.
    public var maxBodyBytes = 64 * 1024

    public init() {}

    /// No limits at all (tests and benchmarks that measure something else).
    public static var unlimited: APILimits {
        var limits = APILimits()
        limits.ratePerIP = 0
        limits.ratePerUDID = 0
        limits.maxRoomSize = 0
        return limits
    }

    init(source: ConfigurationSource) throws(ConfigurationError) {
        ratePerIP = try Self.number(.apiRatePerIP, source) ?? ratePerIP
        burstPerIP = try Self.number(.apiBurstPerIP, source) ?? burstPerIP
        ratePerUDID = try Self.number(.apiRatePerUDID, source) ?? ratePerUDID
        burstPerUDID = try Self.number(.apiBurstPerUDID, source) ?? burstPerUDID
        if let size = try Self.number(.apiMaxRoomSize, source) {
            guard size == size.rounded() else { throw Configuration.invalid(.apiMaxRoomSize, source, "expected a whole number") }
            maxRoomSize = Int(size)
        }
        if let text = source.value(.apiMaxBody) {
            guard let bytes = Int(text), (256...(16 << 20)).contains(bytes) else {
                throw Configuration.invalid(.apiMaxBody, source, "expected a number of bytes from 256 to 16777216, got '\(text)'")
            }
            maxBodyBytes = bytes
        }
    }

    private static func number(_ key: ConfigurationKey, _ source: ConfigurationSource) throws(ConfigurationError) -> Double? {
        guard let text = source.value(key) else { return nil }
        guard let value = Double(text), value >= 0, value.isFinite else {
            throw Configuration.invalid(key, source, "expected a number ≥ 0 (0: no limit), got '\(text)'")
        }
        return value
    }
}

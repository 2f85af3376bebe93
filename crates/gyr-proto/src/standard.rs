//! The standard gRPC services every gyr server adds beside `gyr.v1.Gyr`, so that generic tools
//! (grpcurl, grpcui, Postman, health probes) work without the `.proto` files: server reflection
//! (`grpc.reflection.v1` and `v1alpha`, over [`crate::FILE_DESCRIPTOR_SET`]) and
//! `grpc.health.v1`.
//!
//! Who may call them is the server's to say: each service is wrapped in the server's `gate`,
//! an interceptor that checks the caller's token as its own calls do.

use crate::{FILE_DESCRIPTOR_SET, SERVICE_NAME};
use tonic::service::interceptor::{InterceptedService, Interceptor};
use tonic_health::ServingStatus;
use tonic_health::server::{HealthReporter, HealthService};

pub use tonic_health::pb::health_server::HealthServer;
pub use tonic_reflection::server::Error as ReflectionError;

/// The two reflection services (`v1`, which grpcurl asks first, and `v1alpha`, which older
/// clients such as grpcio's speak), both behind `gate`.
#[allow(clippy::type_complexity)]
pub fn reflection<G: Interceptor + Clone>(
    gate: G,
) -> Result<
    (
        InterceptedService<
            tonic_reflection::server::v1::ServerReflectionServer<
                impl tonic_reflection::server::v1::ServerReflection,
            >,
            G,
        >,
        InterceptedService<
            tonic_reflection::server::v1alpha::ServerReflectionServer<
                impl tonic_reflection::server::v1alpha::ServerReflection,
            >,
            G,
        >,
    ),
    ReflectionError,
> {
    let builder = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let v1 = builder().build_v1()?;
    let v1alpha = builder().build_v1alpha()?;
    Ok((
        InterceptedService::new(v1, gate.clone()),
        InterceptedService::new(v1alpha, gate),
    ))
}

/// What `grpc.health.v1` reports: the server as a whole (`""`) and `gyr.v1.Gyr`, both
/// `SERVING` from the start and `NOT_SERVING` once the server begins to stop.
#[derive(Debug, Clone)]
pub struct Health {
    reporter: HealthReporter,
}

impl Health {
    /// Reports `SERVING` until told otherwise.
    pub async fn new() -> Health {
        let health = Health {
            reporter: HealthReporter::new(),
        };
        health.set(true).await;
        health
    }

    /// A `grpc.health.v1.Health` service reporting this health, behind `gate` (a server with
    /// several listeners serves one on each).
    pub fn service<G: Interceptor>(
        &self,
        gate: G,
    ) -> InterceptedService<HealthServer<HealthService>, G> {
        let svc = HealthService::from_health_reporter(self.reporter.clone());
        InterceptedService::new(HealthServer::new(svc), gate)
    }

    /// Reports `SERVING` (or `NOT_SERVING`) for the server and for `gyr.v1.Gyr`; watchers are told at once.
    pub async fn set(&self, serving: bool) {
        let status = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for service in ["", SERVICE_NAME] {
            self.reporter.set_service_status(service, status).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use tonic_health::pb::health_server::Health as _;
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus as Wire};

    #[test]
    fn the_descriptor_set_holds_every_file_of_the_api() {
        // `google.protobuf.FileDescriptorSet`, read only as far as the files' names.
        #[derive(Clone, PartialEq, Message)]
        struct Set {
            #[prost(message, repeated, tag = "1")]
            file: Vec<File>,
        }
        #[derive(Clone, PartialEq, Message)]
        struct File {
            #[prost(string, optional, tag = "1")]
            name: Option<String>,
        }
        let set = Set::decode(FILE_DESCRIPTOR_SET).unwrap();
        let mut names: Vec<_> = set.file.into_iter().filter_map(|f| f.name).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "gyr/v1/common.proto",
                "gyr/v1/events.proto",
                "gyr/v1/rules.proto",
                "gyr/v1/service.proto",
                "gyr/v1/steer.proto"
            ]
        );
    }

    #[test]
    fn reflection_builds_from_the_descriptor_set() {
        let open = |r: tonic::Request<()>| Ok(r);
        assert!(reflection(open).is_ok());
    }

    async fn status(svc: &HealthService, service: &str) -> Wire {
        let req = tonic::Request::new(HealthCheckRequest {
            service: service.into(),
        });
        let reply = svc.check(req).await.unwrap().into_inner();
        Wire::try_from(reply.status).unwrap()
    }

    #[tokio::test]
    async fn health_starts_serving_and_says_when_it_stops() {
        let health = Health::new().await;
        let svc = HealthService::from_health_reporter(health.reporter.clone());
        for service in ["", SERVICE_NAME] {
            assert_eq!(status(&svc, service).await, Wire::Serving, "{service:?}");
        }
        health.set(false).await;
        for service in ["", SERVICE_NAME] {
            assert_eq!(status(&svc, service).await, Wire::NotServing, "{service:?}");
        }
        let req = tonic::Request::new(HealthCheckRequest {
            service: "no.Such".into(),
        });
        assert_eq!(
            svc.check(req).await.unwrap_err().code(),
            tonic::Code::NotFound
        );
    }
}

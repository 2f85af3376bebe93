//! How the CLI reports what `gyr_client` could not do: exit code 2 when the user's input was
//! at fault (a wrong target, a refused request), 1 otherwise; a program's text is shown with
//! its control characters made visible, never sent to the terminal.

use crate::Failure;
use crate::show::printable;
use gyr_client::ClientError;

pub(crate) use gyr_client::Session;

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        let user = e.is_user_error();
        let error = anyhow::anyhow!("{}", printable(&e.to_string()));
        if user {
            Failure::input(error)
        } else {
            Failure::from(error)
        }
    }
}

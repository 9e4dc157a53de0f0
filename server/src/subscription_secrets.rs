//! A subscription's secret parts besides its signing secrets: the extra headers' values and the
//! receiver's credentials. Each is sealed at rest as one JSON value, bound to its row and column
//! (a value copied into another row or column does not open), and read back by the rule that
//! first accepted it.

use domain::ids::SubscriptionId;
use domain::request::{DeliveryAuth, ExtraHeaders, FieldRule};

use crate::secrets::{Sealer, Unsealable};

/// The associated data a part is sealed with: its row and its column.
fn bound(id: &SubscriptionId, column: &str) -> String {
    format!("{id}/{column}")
}

pub fn seal_headers(sealer: &Sealer, id: &SubscriptionId, headers: &ExtraHeaders) -> Option<String> {
    (!headers.0.is_empty()).then(|| sealer.seal(&headers.to_json().to_string(), &bound(id, "headers")))
}

pub fn seal_auth(sealer: &Sealer, id: &SubscriptionId, auth: &DeliveryAuth) -> String {
    sealer.seal(&auth.to_json().to_string(), &bound(id, "auth"))
}

/// The headers sealed in `sealed`; none when there are none.
pub fn open_headers(sealer: &Sealer, id: &SubscriptionId, sealed: Option<&str>) -> Result<ExtraHeaders, Unsealable> {
    match sealed {
        None => Ok(ExtraHeaders::default()),
        Some(sealed) => read(&sealer.open(sealed, &bound(id, "headers"))?),
    }
}

pub fn open_auth(
    sealer: &Sealer,
    id: &SubscriptionId,
    sealed: Option<&str>,
) -> Result<Option<DeliveryAuth>, Unsealable> {
    sealed.map(|sealed| read(&sealer.open(sealed, &bound(id, "auth"))?)).transpose()
}

fn read<R: FieldRule>(text: &str) -> Result<R, Unsealable> {
    let value = serde_json::from_str(text).map_err(|_| Unsealable)?;
    R::read(&value, "").map_err(|_| Unsealable)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::secrets::SecretKey;

    #[test]
    fn each_part_opens_only_in_its_own_row_and_column() {
        let sealer = Sealer::new(&SecretKey::generate());
        let (id, other) = (SubscriptionId::from("sub_1".to_string()), SubscriptionId::from("sub_2".to_string()));
        let headers = ExtraHeaders::read(&json!({"X-Api-Key": "k3y"}), "headers").unwrap();
        let sealed = seal_headers(&sealer, &id, &headers).unwrap();
        assert!(!sealed.contains("k3y"));
        assert_eq!(open_headers(&sealer, &id, Some(&sealed)).unwrap(), headers);
        assert!(open_headers(&sealer, &other, Some(&sealed)).is_err(), "bound to its row");
        assert!(open_auth(&sealer, &id, Some(&sealed)).is_err(), "bound to its column");
        assert_eq!(seal_headers(&sealer, &id, &ExtraHeaders::default()), None, "no headers, nothing stored");

        let auth = DeliveryAuth::Bearer { token: "t0k".into() };
        let sealed = seal_auth(&sealer, &id, &auth);
        assert_eq!(open_auth(&sealer, &id, Some(&sealed)).unwrap(), Some(auth));
        assert_eq!(open_auth(&sealer, &id, None).unwrap(), None);
    }
}

SELECT a.`id`, b.`id` FROM `db`.`orders` AS a JOIN `db`.`Orders` AS b ON a.id = b.id WHERE a.status = 'F' AND b.id IS NULL
